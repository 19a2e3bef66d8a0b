package srv6

import (
	"net/netip"
	"testing"
)

func TestSmokeEncapDecodeEnd(t *testing.T) {
	inner := UDP6(netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2"), 1000, 2000, []byte("hi"))
	travel := []netip.Addr{netip.MustParseAddr("fc00:1::e"), netip.MustParseAddr("fc00:2::e"), netip.MustParseAddr("fc00:3::d6")}
	pkt, err := Encap(netip.MustParseAddr("fc00:0::1"), travel, inner)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Decode(pkt, false)
	if err != nil {
		t.Fatal(err)
	}
	if p.SRH == nil || p.SRH.SegmentsLeft != 2 || p.Outer.Dst != travel[0] || p.Inner6 == nil || p.L4 == nil || p.L4.DstPort != 2000 || string(p.Payload) != "hi" {
		t.Fatalf("decoded %+v", p)
	}
	out, err := MutateEnd(pkt)
	if err != nil {
		t.Fatal(err)
	}
	q, err := Decode(out, false)
	if err != nil {
		t.Fatal(err)
	}
	if q.Outer.Dst != travel[1] || q.SRH.SegmentsLeft != 1 || q.Outer.HopLimit != 63 {
		t.Fatalf("after end %+v %+v", q.Outer, q.SRH)
	}
}
