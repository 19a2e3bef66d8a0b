package apply

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestOwned: routes and rules srchain wrote (tagged RTProto) that no
// state names any more, as an agent killed in the middle of an apply
// leaves them, are reported by CheckOwned and removed by an apply with
// Options.Owned; routes and rules of anyone else stay (issue 38 item 3).
func TestOwned(t *testing.T) {
	a, _ := pair(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node := richNode()
	if err := Apply(ctx, a, node); err != nil {
		t.Fatal(err)
	}
	// What a bigger desired state, applied in part, left: a route, a
	// SID, a policy table route and its rule; plus someone else's.
	bigger := richNode()
	bigger.Routes = append(bigger.Routes, node.Routes[2], node.Routes[3])
	bigger.Routes[len(bigger.Routes)-2].Dst = p("fc00:98::/64")
	bigger.Routes[len(bigger.Routes)-1].Dst = p("10.0.98.0/24")
	bigger.Routes[len(bigger.Routes)-1].Table = 198
	bigger.Rules = append(bigger.Rules, node.Rules[0])
	bigger.Rules[len(bigger.Rules)-1].Priority = 198
	bigger.Rules[len(bigger.Rules)-1].Table = 198
	bigger.SIDs = append(bigger.SIDs, node.SIDs[0])
	bigger.SIDs[len(bigger.SIDs)-1].SID = p("fc00:1::98/128")
	if err := Apply(ctx, a, bigger); err != nil {
		t.Fatal(err)
	}
	for _, argv := range [][]string{
		{"ip", "-6", "route", "add", "fc00:97::/64", "dev", "eth0"},
		{"ip", "-4", "rule", "add", "pref", "197", "to", "10.0.97.0/24", "table", "197"},
	} {
		if _, err := a.Run(ctx, argv[0], argv[1:]...); err != nil {
			t.Fatal(err)
		}
	}
	// Without Owned, nothing tells the extras: Check of node finds nothing.
	if drift, err := Check(ctx, a, node); err != nil || len(drift) != 0 {
		t.Fatalf("Check: %v %v", drift, err)
	}
	drift, err := CheckOwned(ctx, a, node)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(drift, "\n")
	for _, want := range []string{"route fc00:98::/64", "route 10.0.98.0/24 table 198", "route fc00:1::98/128", "rule pref=198"} {
		if !strings.Contains(got, want) {
			t.Errorf("CheckOwned lacks %q:\n%s", want, got)
		}
	}
	if len(drift) != 4 {
		t.Errorf("CheckOwned: %d items, want 4:\n%s", len(drift), got)
	}
	res, err := ApplyWith(ctx, a, node, Options{Owned: true})
	if err != nil || res.Changes != 4 {
		t.Fatalf("apply owned: %d changes, %v; want 4", res.Changes, err)
	}
	if drift, err := CheckOwned(ctx, a, node); err != nil || len(drift) != 0 {
		t.Errorf("after the owned apply: %v %v", drift, err)
	}
	snap := snapshot(t, a)
	for _, want := range []string{"fc00:97::/64 dev eth0", "197:\tfrom all to 10.0.97.0/24 lookup 197"} {
		if !strings.Contains(snap, want) {
			t.Errorf("someone else's %q was removed:\n%s", want, snap)
		}
	}
	for _, gone := range []string{"fc00:98::", "10.0.98.0", "fc00:1::98", "198:"} {
		if strings.Contains(snap, gone) {
			t.Errorf("%q left:\n%s", gone, snap)
		}
	}
}
