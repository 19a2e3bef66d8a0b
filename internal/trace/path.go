package trace

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Hop is one node on a packet's path: the first frame of the packet the
// node received (Arrive; nil at the sender) and the first it sent (Leave;
// nil at the receiver).
type Hop struct {
	Node   string
	Arrive *Event
	Leave  *Event
}

// Seen returns the view of the packet at the node: as it arrived, or as
// it left the sender.
func (h Hop) Seen() *Event {
	if h.Arrive != nil {
		return h.Arrive
	}
	return h.Leave
}

// Match selects the frames of one probe.
type Match struct {
	// Dst is the final destination of the probe (the inner destination).
	Dst netip.Addr
	// Proto is the transport protocol (0: any).
	Proto uint8
	// DstPort, when set, must match (UDP/TCP).
	DstPort uint16
}

// Matches reports whether e is the forward direction of the probe.
func (m Match) Matches(e Event) bool {
	if e.Err != nil && !e.InnerDst.IsValid() {
		return false
	}
	if e.InnerDst != m.Dst || !e.IsRequest() {
		return false
	}
	if m.Proto != 0 && e.Proto != m.Proto {
		return false
	}
	return m.DstPort == 0 || e.DstPort == m.DstPort
}

// Path orders the visits of the packet to each node by their first frame
// (events must be in timestamp order, as Capture.Events returns). A node
// the packet comes back to after it went on to another node is a new hop:
// an egress that forwards a packet it does not own yet to the NF whose SID
// is active, and later receives it again to decapsulate it, appears twice,
// so the node that decapsulates is on the path under the SID it served.
func Path(events []Event, m Match) []Hop {
	var hops []Hop
	latest := map[string]int{} // node -> index of its latest visit
	for i := range events {
		e := &events[i]
		if !m.Matches(*e) {
			continue
		}
		j, ok := latest[e.Node]
		if ok && e.Dir == In {
			h := hops[j]
			// Back again: another node saw the packet since, or it
			// already left this one.
			if j != len(hops)-1 || h.Leave != nil {
				ok = false
			}
		}
		if !ok {
			j = len(hops)
			latest[e.Node] = j
			hops = append(hops, Hop{Node: e.Node})
		}
		h := &hops[j]
		switch {
		case e.Dir == In && h.Arrive == nil:
			h.Arrive = e
		case e.Dir == Out && h.Leave == nil:
			h.Leave = e
		}
	}
	return hops
}

// Traversed returns, in order, the active SIDs (destination addresses)
// under which the packet reached each hop while it carried an SRH.
func Traversed(hops []Hop) []netip.Addr {
	var out []netip.Addr
	for _, h := range hops {
		if e := h.Arrive; e != nil && e.HasSRH {
			out = append(out, e.OuterDst)
		}
	}
	return out
}

// Service is one segment an SRH's segments left went past while the packet
// was at a node: the node consumed (served) that SID, whether its arrival
// was captured with the SID active or the node ran it locally (an NF on the
// ingress, several SIDs of one node in a row).
type Service struct {
	// Hop is the index of the visit in the hops given to Consumed.
	Hop  int
	Node string
	SID  netip.Addr
	// Unproven marks a segment that was still ahead when the node removed
	// the SRH with segments left > 0 at its last observation: the node may
	// have run each of those SIDs locally before decapsulating, or
	// decapsulated with the active SID (a SID misconfigured as End.DX*),
	// skipping the rest. Captures cannot tell these apart.
	Unproven bool
}

// Consumed infers, in order, which node consumed each segment of the
// packet's SRH. Every captured SRH carries the whole segment list, so the
// segments whose index lies between two consecutive observed segments left
// values were consumed by the node that held the packet in between (the
// node of the earlier observation); those before the active one when an SRH
// is first seen, by the node that added it. When the SRH disappears
// (decapsulation), a correct decapsulation has segments left 0 (RFC 8986
// 4.4, End.DX*/End.DT*: the decapsulating SID is the last one), so the last
// segment is credited to the node that removed it only when it was last
// seen with segments left 0; if it was last seen with segments left > 0,
// every segment from the active one on is returned Unproven. A router that
// only forwards the packet changes no segments left and consumes nothing.
//
// Pathlets nest SR packets (Event.Nested): each list is followed on its
// own, identified by its segments. A list that vanishes while a list that
// was inside it is still there ended its pathlet (End.DT6), and is credited
// as a decapsulation; between two observations, ended pathlets come first
// (outermost first), then the lists that remain, innermost first (an outer
// list only moves after the lists inside it were pushed). Hops must be in
// path order (Path).
func Consumed(hops []Hop) []Service {
	type list struct {
		segs []netip.Addr
		next int // travel index of the first segment not consumed yet
	}
	var out []Service
	var open []*list // as last observed, outermost first
	at := -1         // hop that holds the packet since the last observation
	take := func(l *list, upto int, unproven bool) {
		for ; l.next < upto && l.next < len(l.segs); l.next++ {
			if at >= 0 {
				out = append(out, Service{Hop: at, Node: hops[at].Node, SID: l.segs[l.next], Unproven: unproven})
			}
		}
	}
	// end credits the rest of a list that was removed.
	end := func(l *list) { take(l, len(l.segs), l.next < len(l.segs)-1) }
	for i, h := range hops {
		for _, e := range []*Event{h.Arrive, h.Leave} {
			if e == nil {
				continue
			}
			if !e.HasSRH {
				for _, l := range open {
					end(l)
				}
				open = nil
				at = i
				continue
			}
			layers := append([]Layer{{SL: e.SL, Segments: e.Segments}}, e.Nested...)
			if slices.ContainsFunc(layers, func(l Layer) bool { return int(l.SL) >= len(l.Segments) }) {
				at = i
				continue
			}
			find := func(segs []netip.Addr) int {
				return slices.IndexFunc(open, func(l *list) bool { return slices.Equal(l.segs, segs) })
			}
			// The deepest open list still there: those outside it that
			// vanished ended their pathlets; any other vanished list was
			// replaced (a new header), and is forgotten.
			deepest := -1
			for j, l := range open {
				if slices.ContainsFunc(layers, func(y Layer) bool { return slices.Equal(y.Segments, l.segs) }) {
					deepest = j
				}
			}
			for j := 0; j < deepest; j++ {
				if !slices.ContainsFunc(layers, func(y Layer) bool { return slices.Equal(y.Segments, open[j].segs) }) {
					end(open[j])
				}
			}
			now := make([]*list, len(layers))
			for j := len(layers) - 1; j >= 0; j-- {
				y := layers[j]
				l := &list{segs: y.Segments}
				if k := find(y.Segments); k >= 0 {
					l = open[k]
				} else if at < 0 {
					// A new SRH, added where the packet was (the sender
					// when it is the first node).
					at = i
				}
				take(l, len(l.segs)-1-int(y.SL), false)
				now[j] = l
			}
			open = now
			at = i
		}
	}
	return out
}

// ContainsInOrder reports whether want appears in got as a subsequence.
func ContainsInOrder(got, want []netip.Addr) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

// AnySRH reports whether any hop saw the packet with an SRH.
func AnySRH(hops []Hop) bool {
	for _, h := range hops {
		for _, e := range []*Event{h.Arrive, h.Leave} {
			if e != nil && e.HasSRH {
				return true
			}
		}
	}
	return false
}

// Describe renders the SRv6 view of one sighting: "SL=1 DA=fc00:2::f1".
func (e *Event) Describe() string {
	if e == nil || !e.HasSRH {
		return ""
	}
	return fmt.Sprintf("SL=%d DA=%s", e.SL, e.OuterDst)
}

// String renders an event for logs and test failures.
func (e Event) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %-3s %s > %s", e.Node, e.Interface, e.Dir, e.OuterSrc, e.OuterDst)
	if e.HasSRH {
		fmt.Fprintf(&b, " SRH SL=%d segs=%v", e.SL, e.Segments)
	}
	if e.Encapsulated || e.InnerDst != e.OuterDst {
		fmt.Fprintf(&b, " inner %s > %s", e.InnerSrc, e.InnerDst)
	}
	fmt.Fprintf(&b, " proto=%d len=%d", e.Proto, e.Len)
	if e.Err != nil {
		fmt.Fprintf(&b, " err=%v", e.Err)
	}
	return b.String()
}
