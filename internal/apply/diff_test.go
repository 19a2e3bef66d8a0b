package apply

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/srchain/srchain/internal/kind"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/state"
)

// TestApplyDifference: applied with the state it replaces (Prev and
// Remove), Apply changes exactly what differs, removes what is gone, and
// reads nothing back for what did not change; without Prev it repairs
// drift.
func TestApplyDifference(t *testing.T) {
	a, _ := pair(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	old := richNode()
	if _, err := ApplyWith(ctx, a, old, Options{}); err != nil {
		t.Fatalf("apply old: %v", err)
	}
	// The new state: the table-100 policy gets another segment list, the
	// inline policy and the End SID go, a rule goes, a route is added.
	cur := old
	cur.Routes = slices.Clone(old.Routes)
	cur.Routes[3].Encap = &state.SREncap{Mode: state.ModeEncap, Segments: []netip.Addr{ad("fc00:2::f3")}}
	cur.Routes = slices.Delete(cur.Routes, 2, 3)
	cur.Routes = append(cur.Routes, state.Route{Dst: p("fc00:77::/64"), Via: ad("fc00:12::2")})
	cur.SIDs = slices.Clone(old.SIDs[1:])
	cur.Rules = slices.Clone(old.Rules[:1])

	// Drift in something unchanged: with Prev it is taken as in place.
	if _, err := a.Run(ctx, "ip", "-6", "route", "del", "fc00:2::/64"); err != nil {
		t.Fatal(err)
	}
	res, err := ApplyWith(ctx, a, cur, Options{Prev: &old, Remove: &old})
	if err != nil {
		t.Fatalf("apply difference: %v", err)
	}
	// replace table 100, add fc00:77::/64, delete the inline policy, the
	// End SID and the IPv6 rule.
	if res.Changes != 5 {
		t.Errorf("apply difference made %d changes, want 5", res.Changes)
	}
	out, _ := a.Run(ctx, "ip", "-6", "route", "show", "table", "all")
	out4, _ := a.Run(ctx, "ip", "-4", "route", "show", "table", "all")
	rules6, _ := a.Run(ctx, "ip", "-6", "rule")
	switch {
	case strings.Contains(out, "fc00:99::/64"):
		t.Errorf("removed inline policy still there:\n%s", out)
	case strings.Contains(out, "fc00:1::e "):
		t.Errorf("removed End SID still there:\n%s", out)
	case !strings.Contains(out, "fc00:77::/64"):
		t.Errorf("added route missing:\n%s", out)
	case !strings.Contains(out4, "segs 1 [ fc00:2::f3 ]"):
		t.Errorf("changed policy not replaced:\n%s", out4)
	case strings.Contains(rules6, "lookup 101"):
		t.Errorf("removed rule still there:\n%s", rules6)
	case strings.Contains(out, "fc00:2::/64"):
		t.Errorf("Prev read back an unchanged route (and repaired it):\n%s", out)
	}
	// Without Prev: the drift is repaired, and only it.
	res, err = ApplyWith(ctx, a, cur, Options{})
	if err != nil || res.Changes != 1 {
		t.Errorf("full apply after the difference: %d changes, %v; want 1 (the deleted route)", res.Changes, err)
	}
	if pending, err := Check(ctx, a, cur); err != nil || len(pending) != 0 {
		t.Errorf("check = %v, %v; want nothing pending", pending, err)
	}
}

// TestManyTables: routes in more tables than Apply reads one by one are
// read in one dump; either way a second apply changes nothing.
func TestManyTables(t *testing.T) {
	a, _ := pair(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node := state.Node{Name: "r1", Interfaces: []state.Interface{{Name: "eth0", Addrs: []netip.Prefix{p("fc00:12::1/64")}}}}
	for i := range 3 * perTableDumps {
		node.Routes = append(node.Routes, state.Route{Table: 1000 + i, Dst: p("fc00:99::/64"), Dev: "eth0",
			Encap: &state.SREncap{Mode: state.ModeEncap, Segments: []netip.Addr{ad("fc00:2::f1")}}})
	}
	res, err := ApplyWith(ctx, a, node, Options{})
	if err != nil || res.Changes != 3*perTableDumps+2 { // + address, eth0 up
		t.Fatalf("first apply: %d changes, %v", res.Changes, err)
	}
	if res, err := ApplyWith(ctx, a, node, Options{}); err != nil || res.Changes != 0 {
		t.Errorf("second apply: %d changes, %v; want 0", res.Changes, err)
	}
}

// fakeDriver records what it was asked to attach and remove.
type fakeDriver struct{ applied, removed []string }

func (f *fakeDriver) Apply(_ context.Context, _ *netns.NS, _ state.Node, p state.Program) (func() error, error) {
	f.applied = append(f.applied, p.NF)
	return nil, nil
}
func (f *fakeDriver) Check(context.Context, *netns.NS, state.Node, state.Program) ([]string, error) {
	return nil, nil
}
func (f *fakeDriver) Remove(_ context.Context, _ *netns.NS, _ state.Node, p state.Program) error {
	f.removed = append(f.removed, p.NF)
	return nil
}
func (f *fakeDriver) Counters(context.Context, *netns.NS, state.Node, state.Program) ([]kind.Counter, error) {
	return nil, nil
}

// TestApplyRemovesPrograms: a program of the previous state that the new
// one lacks (its NF deleted from the spec) is removed by its driver; the
// others are left attached.
func TestApplyRemovesPrograms(t *testing.T) {
	a, _ := pair(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := &fakeDriver{}
	drivers := map[string]ProgramDriver{"fake": f}
	old := state.Node{Name: "r1", Interfaces: []state.Interface{{Name: "eth0"}},
		Programs: []state.Program{{Kind: "fake", NF: "fw1", Interfaces: []string{"eth0"}}, {Kind: "fake", NF: "fw2", Interfaces: []string{"eth0"}}}}
	if _, err := ApplyWith(ctx, a, old, Options{Drivers: drivers}); err != nil {
		t.Fatal(err)
	}
	cur := old
	cur.Programs = old.Programs[:1]
	if _, err := ApplyWith(ctx, a, cur, Options{Drivers: drivers, Prev: &old, Remove: &old}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.removed, []string{"fw2"}) {
		t.Errorf("removed %v, want [fw2]", f.removed)
	}
}
