package lab

import (
	"net/netip"

	"github.com/srchain/srchain/internal/state"
	"github.com/srchain/srchain/internal/trace"
)

// flavorOf returns the NEXT-C-SID flavor of the SID whose prefix holds a
// on some node, and that node.
func flavorOf(net *state.Network, a netip.Addr) (state.CSIDFlavor, string) {
	for _, n := range net.Nodes {
		for _, s := range n.SIDs {
			if s.NextCSID != (state.CSIDFlavor{}) && s.SID.Contains(a) {
				return s.NextCSID, n.Name
			}
		}
	}
	return state.CSIDFlavor{}, ""
}

// expandCSIDs returns the SIDs a segment stands for: the segment itself,
// or, when it is a C-SID container (its first C-SID is a SID with the
// NEXT-C-SID flavor), each non-zero C-SID as a full SID (block + C-SID,
// zeros after), in travel order (RFC 9800 section 4.1).
func expandCSIDs(net *state.Network, seg netip.Addr) []netip.Addr {
	f, _ := flavorOf(net, seg)
	if f == (state.CSIDFlavor{}) {
		return []netip.Addr{seg}
	}
	return f.Expand(seg)
}

// csidShifts returns the SIDs served by a NEXT-C-SID End that shifted its
// container: the packet arrived at a node with destination D and left it
// with another destination, the same Segments Left and segment list, and
// D hits a flavored SID of that node. The SID served is D's first C-SID
// as a full SID. Segments Left does not move there, so trace.Consumed,
// which follows Segments Left, does not see it.
func csidShifts(net *state.Network, hops []trace.Hop) []trace.Service {
	var out []trace.Service
	for i, h := range hops {
		in, leave := h.Arrive, h.Leave
		if in == nil || leave == nil || !in.HasSRH || !leave.HasSRH || in.SL != leave.SL || in.OuterDst == leave.OuterDst {
			continue
		}
		f, node := flavorOf(net, in.OuterDst)
		if node != h.Node {
			continue
		}
		if sids := f.Expand(in.OuterDst); len(sids) > 0 {
			out = append(out, trace.Service{Hop: i, Node: h.Node, SID: sids[0]})
		}
	}
	return out
}
