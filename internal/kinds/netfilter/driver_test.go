package netfilter

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/srchain/srchain/internal/bpfrt"
	"github.com/srchain/srchain/internal/kinds/kindtest"
	"github.com/srchain/srchain/internal/nft"
	"github.com/srchain/srchain/internal/state"
	"github.com/srchain/srchain/internal/testutil"
)

func testProgram(t *testing.T, ruleset string) state.Program {
	t.Helper()
	cfg, err := json.Marshal(Program{ArgsBits: 16, SID: netip.MustParsePrefix("fc00:2::f1:0/112"), Ruleset: ruleset, RestoreMTU: 1420})
	if err != nil {
		t.Fatal(err)
	}
	return state.Program{Kind: Name, NF: "anf", Interfaces: []string{"eth0"}, Config: cfg}
}

// TestDriver: Apply is idempotent, Check reports what was removed by
// hand (the table, a link, the rule) and Apply repairs it; a ruleset nft
// rejects fails Apply and leaves the running one; Remove leaves nothing.
func TestDriver(t *testing.T) {
	testutil.RequireTool(t, "nft")
	a, _ := kindtest.Pair(t, "n")
	ctx := context.Background()
	d := driver{}
	rs := "chain forward {\n  type filter hook forward priority filter;\n  counter accept\n}\n"
	p := testProgram(t, rs)
	t.Cleanup(func() { _ = d.Remove(ctx, a, state.Node{}, p) })
	undo, err := d.Apply(ctx, a, state.Node{}, p)
	if err != nil || undo == nil {
		t.Fatalf("first apply: undo %v, %v", undo != nil, err)
	}
	drift := func() []string {
		t.Helper()
		dr, err := d.Check(ctx, a, state.Node{}, p)
		if err != nil {
			t.Fatal(err)
		}
		return dr
	}
	if dr := drift(); len(dr) != 0 {
		t.Fatalf("drift after apply: %q", dr)
	}
	if undo, err := d.Apply(ctx, a, state.Node{}, p); err != nil || undo != nil {
		t.Fatalf("second apply changed something: undo %v, %v", undo != nil, err)
	}
	repair := func(what string, breakIt func()) {
		t.Helper()
		breakIt()
		dr := drift()
		if !strings.Contains(strings.Join(dr, "\n"), what) {
			t.Errorf("after breaking %s: drift %q", what, dr)
		}
		if _, err := d.Apply(ctx, a, state.Node{}, p); err != nil {
			t.Fatalf("repair %s: %v", what, err)
		}
		if dr := drift(); len(dr) != 0 {
			t.Errorf("after repairing %s: drift %q", what, dr)
		}
	}
	repair("table inet srchain_anf missing", func() {
		if _, err := a.Run(ctx, "nft", "delete", "table", "inet", Table); err != nil {
			t.Fatal(err)
		}
	})
	repair("not attached on eth0", func() {
		l, _ := a.Netlink().LinkByName("eth0")
		if err := bpfrt.DetachPinned(inPin(PinDir(a), l.Attrs().Index)); err != nil {
			t.Fatal(err)
		}
	})
	// An older srchain's program under srchain's pins (an upgrade): the
	// programs are loaded again.
	other := testutil.OtherBuild(t, ebpf.SchedCLS, "other_build")
	for _, c := range []struct{ dev, pin, what string }{
		{RestoreDev, "out", "srchain_anf_out on srcanf0 egress runs another build's code"},
		{RestorePeer, "fwd", "srchain_anf_fwd on srcanf1 runs another build's code"},
		{"eth0", "in", "srchain_anf_in on eth0 runs another build's code"},
	} {
		dev, err := a.Netlink().LinkByName(c.dev)
		if err != nil {
			t.Fatal(err)
		}
		path := map[string]func(string, int) string{"out": outPin, "fwd": fwdPin, "in": inPin}[c.pin](PinDir(a), dev.Attrs().Index)
		var before link.ID
		repair(c.what, func() {
			l, err := link.LoadPinnedLink(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if err := l.Update(other); err != nil {
				t.Fatal(err)
			}
			info, err := l.Info()
			if err != nil {
				t.Fatal(err)
			}
			before = info.ID
		})
		// In place: the same link, this build's program in it.
		l, err := link.LoadPinnedLink(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		info, err := l.Info()
		l.Close()
		if err != nil || info.ID != before {
			t.Errorf("%s: link %d after the repair, want %d swapped in place (%v)", c.what, info.ID, before, err)
		}
	}
	repair("rule pref 900", func() {
		if _, err := a.Run(ctx, "ip", "-6", "rule", "del", "pref", "900"); err != nil {
			t.Fatal(err)
		}
	})

	// A ruleset nft rejects: an error at its line, the old one runs on.
	bad := testProgram(t, "chain forward {\n  type filter hook forward priority filter;\n  frobnicate\n}\n")
	_, err = d.Apply(ctx, a, state.Node{}, bad)
	var ne *nft.Error
	if !errors.As(err, &ne) || ne.Line != 3 {
		t.Errorf("bad ruleset: %v, want an nft error at line 3", err)
	}
	if dr := drift(); len(dr) != 0 {
		t.Errorf("drift after a refused ruleset: %q", dr)
	}

	// A new ruleset replaces the old in one transaction; undo puts the
	// old one back.
	p2 := testProgram(t, "chain forward {\n  type filter hook forward priority filter;\n  meta mark & 0xffff == 0x1111 counter drop\n}\n")
	undo, err = d.Apply(ctx, a, state.Node{}, p2)
	if err != nil || undo == nil {
		t.Fatalf("apply new ruleset: %v", err)
	}
	if out, _ := a.Run(ctx, "nft", "list", "table", "inet", Table); !strings.Contains(out, "0x00001111") && !strings.Contains(out, "0x1111") {
		t.Errorf("new ruleset not loaded:\n%s", out)
	}
	if err := undo(); err != nil {
		t.Fatal(err)
	}
	if dr := drift(); len(dr) != 0 {
		t.Errorf("undo did not restore the old ruleset: %q", dr)
	}

	if err := d.Remove(ctx, a, state.Node{}, p); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(PinDir(a)); !os.IsNotExist(err) {
		t.Errorf("pins left after remove: %v", err)
	}
	if _, err := a.Netlink().LinkByName(RestoreDev); err == nil {
		t.Error("restore device left after remove")
	}
	if out, _ := a.Run(ctx, "ip", "-6", "rule"); strings.Contains(out, "lookup 30000") {
		t.Errorf("rule left after remove:\n%s", out)
	}
}
