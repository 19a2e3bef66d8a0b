package apply

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/srchain/srchain/internal/state"
)

// TestApplyNextCSIDFlavor: a SID with the NEXT-C-SID flavor is installed
// with it (the kernel says "flavors next-csid lblen 32 nflen 32"), a
// second apply changes nothing although the library reads the route back
// without its flavor, and a route that lost the flavor (replaced by
// hand) is reported by Check and repaired.
func TestApplyNextCSIDFlavor(t *testing.T) {
	a, _ := pair(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node := richNode()
	flv := state.CSIDFlavor{BlockBits: 32, NodeFunctionBits: 32}
	node.SIDs = append(node.SIDs, state.LocalSID{SID: p("fc00:0:1:7::/64"), Behavior: state.End, Datapath: state.Kernel, NextCSID: flv})
	if _, err := ApplyWith(ctx, a, node, Options{}); err != nil {
		t.Fatal(err)
	}
	const want = "fc00:0:1:7::/64  encap seg6local action End flavors next-csid lblen 32 nflen 32"
	route := func() string {
		out, err := a.Run(ctx, "ip", "-6", "route", "show", "fc00:0:1:7::/64")
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if out := route(); !strings.Contains(out, want) {
		t.Fatalf("route = %q, want %q", out, want)
	}
	if res, err := ApplyWith(ctx, a, node, Options{}); err != nil || res.Changes != 0 {
		t.Errorf("re-apply = %d changes, %v; want 0", res.Changes, err)
	}
	if _, err := a.Run(ctx, "ip", "-6", "route", "replace", "fc00:0:1:7::/64", "encap", "seg6local", "action", "End", "dev", "eth0"); err != nil {
		t.Fatal(err)
	}
	pending, err := Check(ctx, a, node)
	if err != nil || len(pending) != 1 || !strings.Contains(pending[0], "next-csid") {
		t.Errorf("check of a route without its flavor = %v, %v", pending, err)
	}
	if res, err := ApplyWith(ctx, a, node, Options{}); err != nil || res.Changes != 1 {
		t.Errorf("repair = %d changes, %v; want 1", res.Changes, err)
	}
	if out := route(); !strings.Contains(out, want) {
		t.Errorf("route after repair = %q", out)
	}
}
