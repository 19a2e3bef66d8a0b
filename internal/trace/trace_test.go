package trace

import (
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/srchain/srchain/internal/srv6"
)

var (
	mac1 = net.HardwareAddr{2, 0, 0, 0, 0, 1}
	mac2 = net.HardwareAddr{2, 0, 0, 0, 0, 2}
	ad   = netip.MustParseAddr
)

func eth(t *testing.T, typ uint16, pkt []byte, err error) []byte {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	return srv6.Ether(mac1, mac2, typ, pkt)
}

func TestDecode(t *testing.T) {
	travel := []netip.Addr{ad("fc00:2::f1"), ad("fc00:3::d4")}
	v4 := srv6.ICMP4Echo(ad("10.0.1.1"), ad("10.0.4.2"), 1, 1)
	v6 := srv6.ICMP6Echo(ad("fc00:a1::1"), ad("fc00:a4::2"), 1, 1)
	enc4, err := srv6.Encap(ad("fc00:1::1"), travel, v4)
	f1 := eth(t, srv6.EtherTypeIPv6, enc4, err)
	ins6, err := srv6.Insert(v6, travel)
	f2 := eth(t, srv6.EtherTypeIPv6, ins6, err)
	udp := srv6.UDP6(ad("fc00:a1::1"), ad("fc00:a4::2"), 1000, 5001, []byte("x"))
	// A pathlet: a binding SID wrapped the SR packet enc4 once more.
	pathlet := []netip.Addr{ad("fc00:5::1"), ad("fc00:5::d76")}
	nest, err := srv6.Encap(ad("fc00:5::5"), pathlet, enc4)
	f3 := eth(t, srv6.EtherTypeIPv6, nest, err)

	cases := []struct {
		name  string
		frame []byte
		want  Event
	}{
		{"plain ipv4", srv6.Ether(mac1, mac2, srv6.EtherTypeIPv4, v4), Event{Family: 4,
			OuterSrc: ad("10.0.1.1"), OuterDst: ad("10.0.4.2"), InnerSrc: ad("10.0.1.1"), InnerDst: ad("10.0.4.2"),
			Proto: srv6.ProtoICMP, ICMPType: 8}},
		{"encap ipv4", f1, Event{Family: 6, OuterSrc: ad("fc00:1::1"), OuterDst: ad("fc00:2::f1"),
			HasSRH: true, SL: 1, Segments: travel, Encapsulated: true,
			InnerSrc: ad("10.0.1.1"), InnerDst: ad("10.0.4.2"), Proto: srv6.ProtoICMP, ICMPType: 8}},
		{"insert ipv6", f2, Event{Family: 6, OuterSrc: ad("fc00:a1::1"), OuterDst: ad("fc00:2::f1"),
			HasSRH: true, SL: 2, Segments: append(slices.Clone(travel), ad("fc00:a4::2")),
			InnerSrc: ad("fc00:a1::1"), InnerDst: ad("fc00:a4::2"), Proto: srv6.ProtoICMPv6, ICMPType: 128}},
		{"pathlet", f3, Event{Family: 6, OuterSrc: ad("fc00:5::5"), OuterDst: ad("fc00:5::1"),
			HasSRH: true, SL: 1, Segments: pathlet, Encapsulated: true, Nested: []Layer{{SL: 1, Segments: travel}},
			InnerSrc: ad("10.0.1.1"), InnerDst: ad("10.0.4.2"), Proto: srv6.ProtoICMP, ICMPType: 8}},
		{"udp6", srv6.Ether(mac1, mac2, srv6.EtherTypeIPv6, udp), Event{Family: 6,
			OuterSrc: ad("fc00:a1::1"), OuterDst: ad("fc00:a4::2"), InnerSrc: ad("fc00:a1::1"), InnerDst: ad("fc00:a4::2"),
			Proto: srv6.ProtoUDP, DstPort: 5001}},
	}
	for _, c := range cases {
		got := Decode(c.frame)
		if got.Err != nil {
			t.Errorf("%s: %v", c.name, got.Err)
			continue
		}
		if got.String() != c.want.String() || !slices.Equal(got.Segments, c.want.Segments) ||
			got.Encapsulated != c.want.Encapsulated || got.ICMPType != c.want.ICMPType || got.DstPort != c.want.DstPort {
			t.Errorf("%s:\n got %v\nwant %v", c.name, got, c.want)
		}
	}
	// Garbage never panics and reports an error.
	for _, b := range [][]byte{nil, {1, 2, 3}, srv6.Ether(mac1, mac2, srv6.EtherTypeIPv6, []byte{0x60, 0, 0})} {
		if ev := Decode(b); ev.Err == nil {
			t.Errorf("Decode(%x) had no error", b)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(srv6.Ether(mac1, mac2, srv6.EtherTypeIPv4, srv6.ICMP4Echo(ad("10.0.0.1"), ad("10.0.0.2"), 1, 1)))
	f.Fuzz(func(t *testing.T, b []byte) { _ = Decode(b) })
}

func TestPath(t *testing.T) {
	t0 := time.Unix(0, 0)
	dst := ad("10.0.4.2")
	sids := []netip.Addr{ad("fc00:2::f1"), ad("fc00:3::d4")}
	ev := func(node string, dir Direction, ms int, srh bool, da netip.Addr, sl uint8) Event {
		return Event{Node: node, Dir: dir, Time: t0.Add(time.Duration(ms) * time.Millisecond), HasSRH: srh,
			OuterDst: da, SL: sl, InnerDst: dst, Proto: srv6.ProtoICMP, ICMPType: 8}
	}
	events := []Event{
		ev("h1", Out, 1, false, dst, 0),
		ev("r1", In, 2, false, dst, 0),
		ev("r1", Out, 3, true, sids[0], 1),
		ev("r2", In, 4, true, sids[0], 1),
		{Node: "r2", Dir: In, InnerDst: ad("10.0.1.1"), Proto: srv6.ProtoICMP, ICMPType: 0}, // reply: ignored
		ev("r2", Out, 5, true, sids[1], 0),
		ev("r3", In, 6, true, sids[1], 0),
		ev("r3", Out, 7, false, dst, 0),
		ev("h2", In, 8, false, dst, 0),
	}
	hops := Path(events, Match{Dst: dst, Proto: srv6.ProtoICMP})
	var nodes []string
	for _, h := range hops {
		nodes = append(nodes, h.Node)
	}
	if !slices.Equal(nodes, []string{"h1", "r1", "r2", "r3", "h2"}) {
		t.Fatalf("path = %v", nodes)
	}
	if got := Traversed(hops); !slices.Equal(got, sids) {
		t.Errorf("traversed = %v, want %v", got, sids)
	}
	if !ContainsInOrder(Traversed(hops), sids[:1]) || ContainsInOrder(Traversed(hops), []netip.Addr{sids[1], sids[0]}) {
		t.Error("ContainsInOrder wrong")
	}
	if !AnySRH(hops) || AnySRH(hops[:1]) {
		t.Error("AnySRH wrong")
	}
	if got := hops[2].Seen().Describe(); got != "SL=1 DA=fc00:2::f1" {
		t.Errorf("Describe = %q", got)
	}
}

func TestDrain(t *testing.T) {
	t0 := time.Unix(100, 0)
	c := &Capture{events: []Event{{Node: "b", Time: t0.Add(time.Second)}, {Node: "a", Time: t0}}}
	got := c.Drain()
	if len(got) != 2 || got[0].Node != "a" || got[1].Node != "b" {
		t.Errorf("Drain = %v, want time order", got)
	}
	if len(c.Drain()) != 0 || len(c.Events()) != 0 {
		t.Error("Drain did not forget")
	}
}

// TestPathRevisit: a node the packet comes back to is a new hop. In the
// compile features spec, r4 (the egress, End.DX4) first forwards the packet
// to r3 (SID of NF ids still active) and decapsulates it when it comes
// back; both visits must be on the path, the second under r4's own SID.
func TestPathRevisit(t *testing.T) {
	t0 := time.Unix(0, 0)
	dst := ad("10.0.6.2")
	fw, ids, dx4 := ad("fc00:2::1:0"), ad("fc00:3::1:0"), ad("fc00:4::1:0")
	ms := 0
	ev := func(node string, dir Direction, srh bool, da netip.Addr, sl uint8) Event {
		ms++
		return Event{Node: node, Dir: dir, Time: t0.Add(time.Duration(ms) * time.Millisecond), HasSRH: srh,
			OuterDst: da, SL: sl, InnerDst: dst, Proto: srv6.ProtoTCP, DstPort: 80}
	}
	events := []Event{
		ev("h1", Out, false, dst, 0),
		ev("r1", In, false, dst, 0),
		ev("r1", Out, true, fw, 2),
		ev("r2", In, true, fw, 2),
		ev("r2", Out, true, ids, 1),
		ev("r4", In, true, ids, 1),
		ev("r4", Out, true, ids, 1),
		ev("r3", In, true, ids, 1),
		ev("r3", Out, true, dx4, 0),
		ev("r4", In, true, dx4, 0),
		ev("r4", Out, false, dst, 0),
		ev("h2", In, false, dst, 0),
	}
	hops := Path(events, Match{Dst: dst, Proto: srv6.ProtoTCP, DstPort: 80})
	var nodes []string
	for _, h := range hops {
		nodes = append(nodes, h.Node)
	}
	if want := []string{"h1", "r1", "r2", "r4", "r3", "r4", "h2"}; !slices.Equal(nodes, want) {
		t.Fatalf("path = %v, want %v", nodes, want)
	}
	if got := hops[5].Arrive.Describe(); got != "SL=0 DA=fc00:4::1:0" {
		t.Errorf("second visit of r4 arrived as %q", got)
	}
	if hops[5].Leave == nil || hops[5].Leave.HasSRH {
		t.Errorf("second visit of r4 left as %v, want the decapsulated packet", hops[5].Leave)
	}
	if got, want := Traversed(hops), []netip.Addr{fw, ids, ids, dx4}; !slices.Equal(got, want) {
		t.Errorf("traversed = %v, want %v", got, want)
	}

	// Two frames of one visit (in on one interface, redirected in on
	// another) stay one hop.
	ms = 0
	one := Path([]Event{ev("a", Out, false, dst, 0), ev("b", In, false, dst, 0), ev("b", In, false, dst, 0),
		ev("b", Out, false, dst, 0), ev("c", In, false, dst, 0)}, Match{Dst: dst})
	if len(one) != 3 {
		t.Errorf("one visit per node: got %d hops, want 3", len(one))
	}
}
