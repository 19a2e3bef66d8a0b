package ingress

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/srchain/srchain/internal/bpfrt"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/state"
	"github.com/srchain/srchain/internal/testutil"
)

// TestDriverReapply: Apply is idempotent (nil undo, nothing changed); a
// grown chain set is swapped in place over the same pinned maps and its
// undo flips back to the previous generation (not a removal); Check sees
// the difference; Remove leaves nothing.
func TestDriverReapply(t *testing.T) {
	testutil.RequireRoot(t)
	ns := testNS(t)
	if _, err := ns.Run(t.Context(), "ip", "link", "add", "a0", "type", "veth", "peer", "name", "a1"); err != nil {
		t.Fatal(err)
	}
	node := state.Node{Name: "r", TunSrc: tunsrc}
	prog := func(cfg Config) state.Program {
		b, err := json.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return state.Program{Kind: Program, Interfaces: []string{"a0"}, Config: b}
	}
	one := Config{Chains: []Chain{testCfg.Chains[1]}}
	one.Chains[0].Dev = "a0"
	two := Config{Chains: append([]Chain{}, one.Chains[0], testCfg.Chains[2])}
	two.Chains[1].Dev = "a0"
	d := Driver{}
	ctx := t.Context()
	t.Cleanup(func() { d.Remove(ctx, ns, node, prog(one)) })

	undo1, err := d.Apply(ctx, ns, node, prog(one))
	if err != nil || undo1 == nil {
		t.Fatalf("first apply: undo %v, %v", undo1 != nil, err)
	}
	if undo, err := d.Apply(ctx, ns, node, prog(one)); err != nil || undo != nil {
		t.Fatalf("same config again: undo %v, %v", undo != nil, err)
	}
	if drift, err := d.Check(ctx, ns, node, prog(one)); err != nil || len(drift) != 0 {
		t.Fatalf("check: %q, %v", drift, err)
	}
	gen := func() uint32 {
		m, err := ebpf.LoadPinnedMap(PinDir(ns)+"/fw_gen", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		var g uint32
		if err := m.Lookup(uint32(0), &g); err != nil {
			t.Fatal(err)
		}
		return g
	}
	g1 := gen()
	undo2, err := d.Apply(ctx, ns, node, prog(two))
	if err != nil || undo2 == nil {
		t.Fatalf("grown chain set: undo %v, %v", undo2 != nil, err)
	}
	if gen() == g1 {
		t.Fatal("generation did not flip")
	}
	if drift, err := d.Check(ctx, ns, node, prog(one)); err != nil || len(drift) != 1 || !strings.Contains(drift[0], "another chain set") {
		t.Fatalf("check against the old config: %q, %v", drift, err)
	}
	if err := undo2(); err != nil {
		t.Fatal(err)
	}
	if gen() != g1 {
		t.Fatal("undo did not flip back")
	}
	if _, err := os.Stat(PinDir(ns) + "/tcx_ingress_" + ifindexOf(t, ns, "a0")); err != nil {
		t.Fatalf("link pin after undo: %v", err)
	}
	if err := d.Remove(ctx, ns, node, prog(two)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(PinDir(ns)); !os.IsNotExist(err) {
		t.Fatalf("pins left after Remove: %v", err)
	}
}

func ifindexOf(t *testing.T, ns *netns.NS, name string) string {
	t.Helper()
	l, err := ns.Netlink().LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(l.Attrs().Index)
}

// TestDriverSwapsOtherBuild: an ingress link that runs other code under
// its pin (what an older srchain left attached) is swapped for this
// build's program by an Apply whose config did not change.
func TestDriverSwapsOtherBuild(t *testing.T) {
	testutil.RequireRoot(t)
	ns := testNS(t)
	if _, err := ns.Run(t.Context(), "ip", "link", "add", "a0", "type", "veth", "peer", "name", "a1"); err != nil {
		t.Fatal(err)
	}
	node := state.Node{Name: "r", TunSrc: tunsrc}
	cfg := Config{Chains: []Chain{testCfg.Chains[1]}}
	cfg.Chains[0].Dev = "a0"
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := state.Program{Kind: Program, Interfaces: []string{"a0"}, Config: b}
	d := Driver{}
	ctx := t.Context()
	t.Cleanup(func() { d.Remove(ctx, ns, node, p) })
	if _, err := d.Apply(ctx, ns, node, p); err != nil {
		t.Fatal(err)
	}
	a0, err := ns.Netlink().LinkByName("a0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := link.LoadPinnedLink(linkPin(PinDir(ns), a0.Attrs().Index, false), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	other := testutil.OtherBuild(t, ebpf.SchedCLS, "srchain_ingress")
	if err := l.Update(other); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Apply(ctx, ns, node, p); err != nil {
		t.Fatal(err)
	}
	if same, err := bpfrt.LinkRuns(l, other); err != nil || same {
		t.Errorf("the ingress link still runs the other build's code (%v)", err)
	}
	if undo, err := d.Apply(ctx, ns, node, p); err != nil || undo != nil {
		t.Errorf("re-apply: undo %v, %v; want nothing to do", undo != nil, err)
	}
}
