package lab

import (

	"github.com/srchain/srchain/internal/state"
	"github.com/srchain/srchain/internal/trace"
)

// throughXDP puts back on the path the nodes that forwarded the probe
// with an XDP program: XDP rewrites and redirects a frame before any
// packet socket sees it, on the way in and on the way out, so such a
// node leaves no frame in the capture. Links are point-to-point veths,
// so a frame that left node A on the link to X and the next frame seen,
// arriving at node B on the link from X, went through X: when X runs its
// End or its ingress program at XDP, X is inserted between them with the frame as A sent it
// (X's arrival) and as B received it (X's departure), both marked
// Inferred. What X did is then judged from those frames like any other
// hop (trace.Consumed). Nothing is inferred for a node without XDP, so
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
		if !ok1 || !ok2 || from.Node != to.Node || !xdp[from.Node] || from.Node == a.Node || from.Node == b.Node {
			continue
		}
		in, leave := *a.Leave, *b.Arrive
		in.Node, in.Interface, in.Dir, in.Inferred = from.Node, from.Interface, trace.In, true
		leave.Node, leave.Interface, leave.Dir, leave.Inferred = to.Node, to.Interface, trace.Out, true
		out = append(out, trace.Hop{Node: from.Node, Arrive: &in, Leave: &leave})
	}
	return out
}

// xdpNodes returns the nodes with an XDP stage that forwards: the End or
// the ingress program in the node's XDP pipeline (Program.XDP).
func xdpNodes(net *state.Network) map[string]bool {
	out := map[string]bool{}
	for _, n := range net.Nodes {
		for _, p := range n.Programs {
			if p.XDP && (p.Kind == state.ProgramEnd || p.Kind == state.ProgramIngress) {
				out[n.Name] = true
			}
		}
	}
	return out
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
