package trace

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// sighting is one frame of a hand-built path: node, direction, SL (-1: no
// SRH) and, when it has one, the segment list in travel order.
type sighting struct {
	node string
	dir  Direction
	sl   int
	segs []netip.Addr
}

func hopsOf(ss []sighting) []Hop {
	dst := ad("10.0.4.2")
	var evs []Event
	for _, s := range ss {
		e := Event{Node: s.node, Dir: s.dir, InnerDst: dst, OuterDst: dst, Proto: 1, ICMPType: 8}
		if s.sl >= 0 {
			e.HasSRH, e.SL, e.Segments, e.Encapsulated = true, uint8(s.sl), s.segs, true
			e.OuterDst = s.segs[len(s.segs)-1-s.sl]
		}
		evs = append(evs, e)
	}
	return Path(evs, Match{Dst: dst})
}

func services(ss []Service) string {
	var out []string
	for _, s := range ss {
		u := ""
		if s.Unproven {
			u = "?"
		}
		out = append(out, fmt.Sprintf("%d:%s:%s%s", s.Hop, s.Node, s.SID, u))
	}
	return strings.Join(out, " ")
}

// TestConsumed: segments a node served are inferred from the segments left
// values around it, also when it served them locally (an NF on the node
// that added the SRH, several SIDs of one node in a row), and when it
// removed the SRH; a node that only forwards serves nothing.
func TestConsumed(t *testing.T) {
	a, b, c, e := ad("fc00:1::1:0"), ad("fc00:2::1:0"), ad("fc00:2::2:0"), ad("fc00:3::1:0")
	d := ad("fc00:a4::2")
	for _, tc := range []struct {
		name string
		path []sighting
		want string
	}{
		{"one NF", []sighting{
			{"h1", Out, -1, nil}, {"r1", In, -1, nil}, {"r1", Out, 1, []netip.Addr{b, e}},
			{"r2", In, 1, []netip.Addr{b, e}}, {"r2", Out, 0, []netip.Addr{b, e}},
			{"r3", In, 0, []netip.Addr{b, e}}, {"r3", Out, -1, nil}, {"h2", In, -1, nil},
		}, "2:r2:fc00:2::1:0 3:r3:fc00:3::1:0"},
		{"NF on the ingress", []sighting{
			{"h1", Out, -1, nil}, {"r1", In, -1, nil}, {"r1", Out, 1, []netip.Addr{a, b, e}},
			{"r2", In, 1, []netip.Addr{a, b, e}}, {"r2", Out, 0, []netip.Addr{a, b, e}},
			{"r3", In, 0, []netip.Addr{a, b, e}}, {"r3", Out, -1, nil}, {"h2", In, -1, nil},
		}, "1:r1:fc00:1::1:0 2:r2:fc00:2::1:0 3:r3:fc00:3::1:0"},
		{"two SIDs of one node, the same twice", []sighting{
			{"r1", Out, 3, []netip.Addr{b, c, c, e}},
			{"r2", In, 3, []netip.Addr{b, c, c, e}}, {"r2", Out, 0, []netip.Addr{b, c, c, e}},
			{"r3", In, 0, []netip.Addr{b, c, c, e}}, {"r3", Out, -1, nil},
		}, "1:r2:fc00:2::1:0 1:r2:fc00:2::2:0 1:r2:fc00:2::2:0 2:r3:fc00:3::1:0"},
		{"NF on the egress, missed departure", []sighting{
			{"r1", In, -1, nil}, {"r1", Out, 1, []netip.Addr{b, e}},
			{"r2", In, 1, []netip.Addr{b, e}},
			{"r3", In, 0, []netip.Addr{b, e}}, {"h2", In, -1, nil},
		}, "1:r2:fc00:2::1:0 2:r3:fc00:3::1:0"},
		{"insert, served locally and delivered with SL 0", []sighting{
			{"r1", In, -1, nil}, {"r1", Out, 2, []netip.Addr{a, c, c, d}},
			{"r2", In, 2, []netip.Addr{a, c, c, d}}, {"r2", Out, 0, []netip.Addr{a, c, c, d}},
			{"r3", In, 0, []netip.Addr{a, c, c, d}}, {"r3", Out, 0, []netip.Addr{a, c, c, d}},
			{"h2", In, 0, []netip.Addr{a, c, c, d}},
		}, "0:r1:fc00:1::1:0 1:r2:fc00:2::2:0 1:r2:fc00:2::2:0"},
		{"forwarded with an NF SID active, then decapsulated", []sighting{
			{"r1", Out, 1, []netip.Addr{b, e}},
			{"r4", In, 1, []netip.Addr{b, e}}, {"r4", Out, -1, nil}, {"h2", In, -1, nil},
		}, "1:r4:fc00:2::1:0? 1:r4:fc00:3::1:0?"},
		// N owns fw1 and fw2 but decapsulates on arrival with SL=2 (fw1's
		// SID set up as End.DX6): neither NF is proven to have run.
		{"decapsulated with SL 2 on the node of both NFs", []sighting{
			{"r1", Out, 2, []netip.Addr{b, c, e}},
			{"r2", In, 2, []netip.Addr{b, c, e}}, {"r2", Out, -1, nil}, {"h2", In, -1, nil},
		}, "1:r2:fc00:2::1:0? 1:r2:fc00:2::2:0? 1:r2:fc00:3::1:0?"},
		{"decapsulated with SL 0", []sighting{
			{"r1", Out, 1, []netip.Addr{b, e}},
			{"r2", In, 1, []netip.Addr{b, e}}, {"r2", Out, 0, []netip.Addr{b, e}},
			{"r3", In, 0, []netip.Addr{b, e}}, {"r3", Out, -1, nil},
		}, "1:r2:fc00:2::1:0 2:r3:fc00:3::1:0"},
		{"not steered", []sighting{{"r1", In, -1, nil}, {"r1", Out, -1, nil}}, ""},
	} {
		if got := services(Consumed(hopsOf(tc.path))); got != tc.want {
			t.Errorf("%s: Consumed = %q, want %q", tc.name, got, tc.want)
		}
	}
	// Forwarding alone consumes nothing: the SID stays active.
	hops := hopsOf([]sighting{{"r1", Out, 1, []netip.Addr{b, e}}, {"r4", In, 1, []netip.Addr{b, e}}, {"r4", Out, 1, []netip.Addr{b, e}}})
	if got := Consumed(hops); len(got) != 0 || !slices.Equal(Traversed(hops), []netip.Addr{b}) {
		t.Errorf("forwarding router consumed %v", got)
	}
}

// TestConsumedPathlets: nested SR packets (a binding SID pushed a pathlet
// around the chain's packet). Each list is followed on its own; a binding
// SID and the NF run locally after it are credited to the node that
// pushed, in that order; a pathlet's End.DT6 seen with segments left 0 and
// the chain's egress after it are proven; an ended pathlet last seen with
// segments left > 0 leaves its rest unproven.
func TestConsumedPathlets(t *testing.T) {
	a, b1, e := ad("fc00:2::a"), ad("fc00:3::b1"), ad("fc00:4::e")
	c, d, end := ad("fc00:3::c"), ad("fc00:2::d"), ad("fc00:4::d76")
	top := []netip.Addr{a, b1, e}
	p := []netip.Addr{c, d, end}
	dst := ad("10.0.4.2")
	ev := func(node string, dir Direction, sl int, segs []netip.Addr, nested ...Layer) Event {
		x := Event{Node: node, Dir: dir, InnerDst: dst, Proto: 1, ICMPType: 8, OuterDst: dst}
		if sl >= 0 {
			x.HasSRH, x.SL, x.Segments, x.Encapsulated, x.Nested = true, uint8(sl), segs, true, nested
			x.OuterDst = segs[len(segs)-1-sl]
		}
		return x
	}
	for _, tc := range []struct {
		name string
		evs  []Event
		want string
	}{
		{"proven", []Event{
			ev("r1", Out, 2, top),
			ev("r2", In, 2, top), ev("r2", Out, 1, top),
			ev("r3", In, 1, top), ev("r3", Out, 1, p, Layer{SL: 0, Segments: top}),
			ev("r2", In, 1, p, Layer{SL: 0, Segments: top}), ev("r2", Out, 0, p, Layer{SL: 0, Segments: top}),
			ev("r4", In, 0, p, Layer{SL: 0, Segments: top}), ev("r4", Out, -1, nil),
		}, "1:r2:fc00:2::a 2:r3:fc00:3::b1 2:r3:fc00:3::c 3:r2:fc00:2::d 4:r4:fc00:4::d76 4:r4:fc00:4::e"},
		{"pathlet ended early", []Event{
			ev("r1", Out, 2, top),
			ev("r2", In, 2, top), ev("r2", Out, 1, top),
			ev("r3", In, 1, top), ev("r3", Out, 1, p, Layer{SL: 0, Segments: top}),
			ev("r2", In, 1, p, Layer{SL: 0, Segments: top}), ev("r2", Out, 0, top),
			ev("r4", In, 0, top), ev("r4", Out, -1, nil),
		}, "1:r2:fc00:2::a 2:r3:fc00:3::b1 2:r3:fc00:3::c 3:r2:fc00:2::d? 3:r2:fc00:4::d76? 4:r4:fc00:4::e"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := services(Consumed(Path(tc.evs, Match{Dst: dst}))); got != tc.want {
				t.Errorf("consumed\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}
