package srv6

import (
	"errors"
	"testing"
)

// TestWalkExt pins the walker's verdicts to those of ipv6_walk
// (bpf/lib/ipv6.h): which headers each set steps over, AH's 4-octet
// length, fragments, the header and offset bounds.
func TestWalkExt(t *testing.T) {
	// ext is one 8-byte extension header announcing next.
	ext := func(next uint8) []byte { return []byte{next, 0, 0, 0, 0, 0, 0, 0} }
	cat := func(bs ...[]byte) []byte {
		var out []byte
		for _, b := range bs {
			out = append(out, b...)
		}
		return out
	}
	ah := []byte{ProtoUDP, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0} // (2+2)*4 = 16 bytes
	frag := func(next uint8, off uint16) []byte {
		return []byte{next, 0, byte(off >> 5), byte(off << 3), 0, 0, 0, 1}
	}
	cases := []struct {
		name     string
		pkt      []byte
		nh       uint8
		set      ExtSet
		maxHdrs  int
		maxOff   int
		wantOff  int
		wantNH   uint8
		wantRt   int
		nonFirst bool
		trunc    bool
	}{
		{"opts stops at routing", cat(ext(ProtoDestOpts), ext(ProtoRouting), ext(ProtoUDP)), ProtoHopByHop, WalkOpts, 4, 0, 16, ProtoRouting, -1, false, false},
		{"all steps over routing", cat(ext(ProtoDestOpts), ext(ProtoRouting), ext(ProtoUDP)), ProtoHopByHop, WalkAll, 6, 0, 24, ProtoUDP, 16, false, false},
		{"opts does not step over a fragment", cat(frag(ProtoUDP, 0)), ProtoFragment, WalkOpts, 4, 0, 0, ProtoFragment, -1, false, false},
		{"first fragment goes on", cat(frag(ProtoDestOpts, 0), ext(ProtoTCP)), ProtoFragment, WalkAll, 6, 0, 16, ProtoTCP, -1, false, false},
		{"non-first fragment stops", cat(frag(ProtoDestOpts, 1), ext(ProtoTCP)), ProtoFragment, WalkAll, 6, 0, 8, ProtoDestOpts, -1, true, false},
		{"ah length in 4-octet units", ah, ProtoAH, WalkAll, 6, 0, 16, ProtoUDP, -1, false, false},
		{"header count bound", cat(ext(ProtoDestOpts), ext(ProtoDestOpts), ext(ProtoUDP)), ProtoDestOpts, WalkOpts, 2, 0, 16, ProtoDestOpts, -1, false, false},
		{"cut header", []byte{ProtoUDP}, ProtoDestOpts, WalkOpts, 4, 0, 0, ProtoDestOpts, -1, false, true},
		{"cut fragment header", frag(ProtoUDP, 0)[:4], ProtoFragment, WalkAll, 6, 0, 0, ProtoFragment, -1, false, true},
		{"offset bound", cat(ext(ProtoDestOpts), ext(ProtoUDP)), ProtoDestOpts, WalkAll, 6, 7, 8, ProtoDestOpts, -1, false, true},
		{"offset bound inclusive", cat(ext(ProtoDestOpts), ext(ProtoUDP)), ProtoDestOpts, WalkAll, 6, 8, 16, ProtoUDP, -1, false, false},
	}
	for _, c := range cases {
		w := ExtWalk{NextHeader: c.nh}
		err := WalkExt(c.pkt, &w, c.set, c.maxHdrs, c.maxOff)
		if got := errors.Is(err, ErrTruncated); got != c.trunc {
			t.Errorf("%s: err = %v, want truncated %v", c.name, err, c.trunc)
			continue
		}
		if w.Off != c.wantOff || w.NextHeader != c.wantNH || w.RoutingOff != c.wantRt || w.NonFirst != c.nonFirst {
			t.Errorf("%s: walk = %+v, want off %d nh %d routing %d nonfirst %v", c.name, w, c.wantOff, c.wantNH, c.wantRt, c.nonFirst)
		}
	}
}
