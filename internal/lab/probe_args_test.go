package lab

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/srchain/srchain/internal/state"
)

// TestChainSIDsWithArgs: an NF SID written with ARGS bits set
// (fc00:2::f1:1111 on the route fc00:2::f1:0/112, examples/anf-testbed.yaml)
// is a segment that differs from its prefix's address; the chain's NF
// SIDs must still be found (they were not: every probe of such a chain
// failed with "chain has no NF SIDs").
func TestChainSIDsWithArgs(t *testing.T) {
	sid := netip.MustParseAddr("fc00:2::f1:1111")
	egr := netip.MustParseAddr("fc00:3::1:0")
	net := &state.Network{Nodes: []state.Node{
		{Name: "nfv", SIDs: []state.LocalSID{{SID: netip.MustParsePrefix("fc00:2::f1:0/112"), Behavior: state.End, NF: "anf"}}},
		{Name: "ingress", Routes: []state.Route{{Dst: netip.MustParsePrefix("10.0.4.0/24"), Chain: "c", Encap: &state.SREncap{Mode: state.ModeEncap, Segments: []netip.Addr{sid, egr}}}}},
	}}
	if got := ChainSIDs(net, "c"); !slices.Equal(got, []netip.Addr{sid}) {
		t.Errorf("ChainSIDs = %v, want [%s]", got, sid)
	}
}
