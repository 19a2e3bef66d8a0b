package lab

import (
	"slices"

	"github.com/srchain/srchain/internal/pipeline"
	"github.com/srchain/srchain/internal/state"
	"github.com/srchain/srchain/internal/trace"
)

// throughXDP puts back on the path the nodes that forwarded the probe
// with an XDP program: XDP rewrites and redirects a frame before any
// packet socket sees it, on the way in and on the way out, so such a
// node leaves no frame in the capture. Links are point-to-point veths,
// so a frame that left node A on the link to X and the next frame seen,
// arriving at node B on the link from X, went through X: when X runs its
// End, SR proxy or ingress program at XDP, X is inserted between them
// with the frame as A sent it (X's arrival) and as B received it (X's
// departure), both marked
// Inferred. What X did is then judged from those frames like any other
// hop (trace.Consumed); an SR proxy's two hops (to its NF and back)
// are each inferred so. Nothing is inferred for a node without XDP, so
// the verdict stays conservative where a capture should have seen it.
func (p *Prober) throughXDP(hops []trace.Hop) []trace.Hop {
	xdp := xdpNodes(p.net)
	if len(xdp) == 0 {
		return hops
	}
	var out []trace.Hop
	for i, a := range hops {
		out = append(out, a)
		if i+1 == len(hops) || a.Leave == nil || hops[i+1].Arrive == nil {
			continue
		}
		b := hops[i+1]
		from, ok1 := peerOf(p.net, a.Node, a.Leave.Interface)
		to, ok2 := peerOf(p.net, b.Node, b.Arrive.Interface)
		if !ok1 || !ok2 || !xdp[from.Node] || !xdp[to.Node] || from.Node == a.Node || to.Node == b.Node {
			continue
		}
		if from.Node == to.Node {
			in, leave := *a.Leave, *b.Arrive
			in.Node, in.Interface, in.Dir, in.Inferred = from.Node, from.Interface, trace.In, true
			leave.Node, leave.Interface, leave.Dir, leave.Inferred = to.Node, to.Interface, trace.Out, true
			out = append(out, trace.Hop{Node: from.Node, Arrive: &in, Leave: &leave})
			continue
		}
		// Two XDP nodes in a row (a firewall node and the IDS after it,
		// say): the frame between them is not seen anywhere. It is what
		// the first one's End made of a's frame (RFC 8986 4.1: SL - 1,
		// DA = the next segment), provided the two are linked.
		mid, ok := linkBetween(p.net, from.Node, to.Node)
		if !ok {
			continue
		}
		step, ok := endStep(*a.Leave)
		if !ok {
			continue
		}
		in1, out1 := *a.Leave, step
		in1.Node, in1.Interface, in1.Dir, in1.Inferred = from.Node, from.Interface, trace.In, true
		out1.Node, out1.Interface, out1.Dir, out1.Inferred = from.Node, mid.Name, trace.Out, true
		in2, out2 := step, *b.Arrive
		in2.Node, in2.Interface, in2.Dir, in2.Inferred = to.Node, mid.Peer.Interface, trace.In, true
		out2.Node, out2.Interface, out2.Dir, out2.Inferred = to.Node, to.Interface, trace.Out, true
		out = append(out, trace.Hop{Node: from.Node, Arrive: &in1, Leave: &out1}, trace.Hop{Node: to.Node, Arrive: &in2, Leave: &out2})
	}
	return out
}

// xdpNodes returns the nodes with an XDP stage that forwards: the End,
// the SR proxies or the ingress program in the node's XDP pipeline
// (Program.XDP).
func xdpNodes(net *state.Network) map[string]bool {
	out := map[string]bool{}
	for _, n := range net.Nodes {
		for _, p := range n.Programs {
			if st := pipeline.Place(p.Kind).Stage; p.XDP && (st == pipeline.End || st == pipeline.Proxy || st == pipeline.Ingress) {
				out[n.Name] = true
			}
		}
	}
	return out
}

// linkBetween returns the interface of node x that leads to node y.
func linkBetween(net *state.Network, x, y string) (state.Interface, bool) {
	for _, n := range net.Nodes {
		if n.Name != x {
			continue
		}
		for _, i := range n.Interfaces {
			if i.Peer.Node == y {
				return i, true
			}
		}
	}
	return state.Interface{}, false
}

// endStep is the frame e after an End: SL - 1 and the destination the
// segment SL - 1 names (Segments is in travel order).
func endStep(e trace.Event) (trace.Event, bool) {
	if !e.HasSRH || e.SL == 0 || int(e.SL) > len(e.Segments) {
		return e, false
	}
	e.Segments = slices.Clone(e.Segments)
	e.SL--
	e.OuterDst = e.Segments[len(e.Segments)-1-int(e.SL)]
	return e, true
}

// peerOf returns the other end of node's interface ifname.
func peerOf(net *state.Network, node, ifname string) (state.Endpoint, bool) {
	for _, n := range net.Nodes {
		if n.Name != node {
			continue
		}
		for _, i := range n.Interfaces {
			if i.Name == ifname {
				return i.Peer, true
			}
		}
	}
	return state.Endpoint{}, false
}
