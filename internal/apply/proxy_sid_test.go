package apply

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/srchain/srchain/internal/state"
)

// TestProxySIDRoute: a SID served by its NF's program (an SR proxy) is a
// blackhole route, so what the program does not take is dropped, never
// forwarded around the NF; a program SID with a kernel behaviour is bad
// state.
func TestProxySIDRoute(t *testing.T) {
	noIf := func(string) (int, error) { return 0, nil }
	r, err := SIDRoute(state.LocalSID{SID: netip.MustParsePrefix("fc00:2::1:0/112"), Behavior: state.EndAD, Datapath: state.ProgramDatapath}, 3, noIf)
	if err != nil || r.Type != 6 /* RTN_BLACKHOLE */ || r.Encap != nil || r.LinkIndex != 0 || r.Dst.String() != "fc00:2::1:0/112" {
		t.Fatalf("route %+v, %v", r, err)
	}
	if _, err := SIDRoute(state.LocalSID{SID: netip.MustParsePrefix("fc00:2::1:0/112"), Behavior: state.End, Datapath: state.ProgramDatapath}, 3, noIf); !errors.Is(err, ErrBadState) {
		t.Errorf("program End: %v", err)
	}
}

// TestApplyProxySID: applied, the proxy SID is a blackhole route next to
// a kernel End SID; a second apply changes nothing; a kernel End route
// put in its place by hand is replaced.
func TestApplyProxySID(t *testing.T) {
	a, _ := pair(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node := state.Node{
		Name:       "px",
		Interfaces: []state.Interface{{Name: "eth0", MTU: 1500, Addrs: []netip.Prefix{p("fc00:12::1/64")}}},
		SIDs: []state.LocalSID{
			{SID: p("fc00:2::1:0/112"), Behavior: state.End, Datapath: state.Kernel, NF: "fwd"},
			{SID: p("fc00:2::2:0/112"), Behavior: state.EndAD, Datapath: state.ProgramDatapath, NF: "fw"},
		},
	}
	if _, err := ApplyWith(ctx, a, node, Options{}); err != nil {
		t.Fatal(err)
	}
	out, _ := a.Run(ctx, "ip", "-6", "route", "show")
	if !strings.Contains(out, "blackhole fc00:2::2:0/112") || !strings.Contains(out, "fc00:2::1:0/112  encap seg6local action End") {
		t.Fatalf("routes:\n%s", out)
	}
	if res, err := ApplyWith(ctx, a, node, Options{}); err != nil || res.Changes != 0 {
		t.Errorf("second apply: %d changes, %v", res.Changes, err)
	}
	if _, err := a.Run(ctx, "ip", "-6", "route", "replace", "fc00:2::2:0/112", "encap", "seg6local", "action", "End", "dev", "eth0"); err != nil {
		t.Fatal(err)
	}
	if res, err := ApplyWith(ctx, a, node, Options{}); err != nil || res.Changes == 0 {
		t.Errorf("repair: %d changes, %v", res.Changes, err)
	}
	if out, _ := a.Run(ctx, "ip", "-6", "route", "show"); !strings.Contains(out, "blackhole fc00:2::2:0/112") {
		t.Errorf("after repair:\n%s", out)
	}
}
