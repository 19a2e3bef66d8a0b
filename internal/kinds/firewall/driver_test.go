package firewall

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/srchain/srchain/internal/kind"
	"github.com/srchain/srchain/internal/kinds/kindtest"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/pipeline"
	"github.com/srchain/srchain/internal/state"
	"github.com/srchain/srchain/internal/testutil"
)

// sendUDP sends one datagram from ns to AddrA port.
func sendUDP(t *testing.T, ns *netns.NS, port int) {
	t.Helper()
	err := ns.Do(func() error {
		c, err := net.Dial("udp6", fmt.Sprintf("[%s]:%d", kindtest.AddrA.Addr(), port))
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("srchain"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// waitCounter waits until the named counter reaches want (the packet
// crosses the veth and neighbour discovery asynchronously); it fails
// after a generous bound, never on timing alone when the program runs.
func waitCounter(t *testing.T, ctx context.Context, ns *netns.NS, p state.Program, name string, want uint64) {
	t.Helper()
	var got uint64
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		cs, err := driver{}.Counters(ctx, ns, state.Node{}, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			if c.Name == name {
				got = c.Value
			}
		}
		if got >= want {
			return
		}
	}
	t.Fatalf("counter %s = %d, want %d: the firewall did not see the packet", name, got, want)
}

// port9 is a firewall on eth0 whose rule 0 drops UDP to port 9.
func port9(t *testing.T, xdp bool) state.Program {
	t.Helper()
	raw, err := json.Marshal(Program{Mode: "basic", Policy: "accept", Rules: []string{"-p udp --dport 9 -j DROP"}})
	if err != nil {
		t.Fatal(err)
	}
	return state.Program{Kind: Name, NF: "t", Interfaces: []string{"eth0"}, Config: raw, XDP: xdp}
}

// applyRepairs applies p over what broke it: Apply changes something,
// Check then reports nothing, rule 0 counts a datagram b sends (its
// want-th packet), and another Apply has nothing to do. It returns the
// repairing Apply's undo.
func applyRepairs(t *testing.T, ctx context.Context, a, b *netns.NS, node state.Node, p state.Program, want uint64) func() error {
	t.Helper()
	d := driver{}
	undo, err := d.Apply(ctx, a, node, p)
	if err != nil || undo == nil {
		t.Fatalf("repairing apply: undo %v, %v; want a change", undo != nil, err)
	}
	if drift, err := d.Check(ctx, a, node, p); err != nil || len(drift) != 0 {
		t.Fatalf("check after the repair = %q, %v", drift, err)
	}
	sendUDP(t, b, 9)
	waitCounter(t, ctx, a, p, "rule/0/packets", want)
	if undo, err := d.Apply(ctx, a, node, p); err != nil || undo != nil {
		t.Errorf("apply after the repair: undo %v, %v; want no change", undo != nil, err)
	}
	return undo
}

// TestApplyReattach: a firewall whose tcx link was detached by hand is
// reported by Check and attached again by Apply, and its rules act again
// (before, a pinned firewall counted as applied: "0 changes" forever,
// while traffic bypassed the rules).
func TestApplyReattach(t *testing.T) {
	a, b := kindtest.Pair(t, "f")
	t.Cleanup(func() { _ = os.RemoveAll(kind.PinDir(a)) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := port9(t, false)
	node := state.Node{Name: "a"}
	d := driver{}
	undo, err := d.Apply(ctx, a, node, p)
	if err != nil || undo == nil {
		t.Fatalf("first apply: undo %v, %v", undo != nil, err)
	}
	if drift, err := d.Check(ctx, a, node, p); err != nil || len(drift) != 0 {
		t.Fatalf("check after apply = %q, %v", drift, err)
	}
	sendUDP(t, b, 9)
	waitCounter(t, ctx, a, p, "rule/0/packets", 1)

	l, err := a.Netlink().LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	pl, err := link.LoadPinnedLink(linkPin(PinDir(a, "t"), l.Attrs().Index), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := pl.Detach(); err != nil { // what `bpftool link detach` does
		t.Fatal(err)
	}
	pl.Close()
	drift, err := d.Check(ctx, a, node, p)
	if err != nil || !slices.Contains(drift, "firewall t: program srchain_fw not attached on eth0") {
		t.Fatalf("check after detach = %q, %v", drift, err)
	}
	undo = applyRepairs(t, ctx, a, b, node, p, 2)

	// The undo of the re-attach detaches it again; Remove then clears all.
	if err := undo(); err != nil {
		t.Fatal(err)
	}
	if drift, _ := d.Check(ctx, a, node, p); len(drift) == 0 {
		t.Error("check after undoing the re-attach reports nothing")
	}
	if err := d.Remove(ctx, a, node, p); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(PinDir(a, "t")); !os.IsNotExist(err) {
		t.Errorf("pin dir after remove: %v", err)
	}
	drift, _ = d.Check(ctx, a, node, p)
	if len(drift) != 1 || !strings.Contains(drift[0], "not pinned") {
		t.Errorf("check after remove = %q", drift)
	}
}

// TestApplySwapsOtherBuild: a pinned firewall whose link and XDP stage
// run an older srchain's code (what an upgrade finds) is reported by
// Check, and Apply puts this build's programs in, over the pinned
// tables: the rules act through the swapped link. The driver used to
// keep any live link and any pinned stage.
func TestApplySwapsOtherBuild(t *testing.T) {
	a, b := kindtest.Pair(t, "g")
	t.Cleanup(func() { _ = os.RemoveAll(kind.PinDir(a)) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := port9(t, true)
	node := state.Node{Name: "a"}
	d := driver{}
	if undo, err := d.Apply(ctx, a, node, p); err != nil || undo == nil {
		t.Fatalf("first apply: undo %v, %v", undo != nil, err)
	}
	eth0, err := a.Netlink().LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := link.LoadPinnedLink(linkPin(PinDir(a, "t"), eth0.Attrs().Index), nil)
	if err != nil {
		t.Fatal(err)
	}
	err = l.Update(testutil.OtherBuild(t, ebpf.SchedCLS, "other_build"))
	l.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := pipeline.PinStage(pipeline.NodeDir(a), pipeline.Firewall, testutil.OtherBuild(t, ebpf.XDP, "other_xdp")); err != nil {
		t.Fatal(err)
	}
	drift, err := d.Check(ctx, a, node, p)
	want := []string{
		"firewall t: program srchain_fw on eth0 runs another build's code",
		"firewall t: not loaded as the xdp pipeline's firewall stage (or an older build's)",
	}
	if err != nil || !slices.Equal(drift, want) {
		t.Fatalf("check with another build's programs = %q, %v; want %q", drift, err, want)
	}
	// Its undo (a later step of the apply failing) keeps this build's
	// programs: it used to unpin the stage it had swapped.
	if err := applyRepairs(t, ctx, a, b, node, p, 1)(); err != nil {
		t.Fatal(err)
	}
	if drift, err := d.Check(ctx, a, node, p); err != nil || len(drift) != 0 {
		t.Fatalf("check after undoing the swap = %q, %v", drift, err)
	}
	if err := d.Remove(ctx, a, node, p); err != nil {
		t.Fatal(err)
	}
}
