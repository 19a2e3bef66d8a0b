package srv6

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"slices"
	"testing"
)

var (
	macA, _ = net.ParseMAC("02:00:00:00:00:0a")
	macB, _ = net.ParseMAC("02:00:00:00:00:0b")
	chain   = []netip.Addr{
		netip.MustParseAddr("fc00:1::e"),
		netip.MustParseAddr("fc00:2::e"),
		netip.MustParseAddr("fc00:3::d6"),
	}
)

// innerCase is one inner packet and what Decode must find in it.
type innerCase struct {
	name    string
	pkt     []byte
	v4      bool
	src     netip.Addr
	dst     netip.Addr
	l4      L4
	payload string
}

func innerCases() []innerCase {
	return []innerCase{
		{"udp6", UDP6(hostA, hostB, 1000, 53, []byte("query")), false, hostA, hostB,
			L4{Proto: ProtoUDP, SrcPort: 1000, DstPort: 53}, "query"},
		{"udp4", UDP4(host4A, host4B, 1000, 53, []byte("q4")), true, host4A, host4B,
			L4{Proto: ProtoUDP, SrcPort: 1000, DstPort: 53}, "q4"},
		{"tcp6 syn", TCP6(hostA, hostB, 40000, 443, TCPSyn, nil), false, hostA, hostB,
			L4{Proto: ProtoTCP, SrcPort: 40000, DstPort: 443, TCPFlags: TCPSyn}, ""},
		{"tcp4 psh ack", TCP4(host4A, host4B, 40000, 80, TCPPsh|TCPAck, []byte("GET /")), true, host4A, host4B,
			L4{Proto: ProtoTCP, SrcPort: 40000, DstPort: 80, TCPFlags: TCPPsh | TCPAck}, "GET /"},
		{"icmp6 echo", ICMP6Echo(hostA, hostB, 7, 9), false, hostA, hostB,
			L4{Proto: ProtoICMPv6, ICMPType: ICMP6EchoRequest, ICMPID: 7, ICMPSeq: 9}, ""},
		{"icmp4 echo", ICMP4EchoData(host4A, host4B, 7, 9, []byte("ping")), true, host4A, host4B,
			L4{Proto: ProtoICMP, ICMPType: ICMP4EchoRequest, ICMPID: 7, ICMPSeq: 9}, "ping"},
	}
}

// checkInner verifies the innermost packet of p against c, checksums included.
func checkInner(t *testing.T, p Packet, c innerCase, wantInner bool) {
	t.Helper()
	var src, dst netip.Addr
	switch {
	case c.v4 && p.Inner4 != nil:
		src, dst = p.Inner4.Src, p.Inner4.Dst
	case !c.v4 && p.Inner6 != nil:
		src, dst = p.Inner6.Src, p.Inner6.Dst
	case !wantInner:
		src, dst = p.Outer.Src, p.Outer.Dst
	default:
		t.Fatalf("no inner packet of the right family: %+v", p)
	}
	if wantInner && (src != c.src || dst != c.dst) {
		t.Fatalf("inner %v -> %v, want %v -> %v", src, dst, c.src, c.dst)
	}
	if p.L4 == nil {
		t.Fatalf("no L4")
	}
	got := *p.L4
	got.Checksum = 0
	if got != c.l4 {
		t.Fatalf("L4 = %+v, want %+v", got, c.l4)
	}
	if string(p.Payload) != c.payload {
		t.Fatalf("payload %q, want %q", p.Payload, c.payload)
	}
}

// verifyChecksums checks the L3/L4 checksums of a builder's packet.
func verifyChecksums(t *testing.T, c innerCase) {
	t.Helper()
	if c.v4 {
		h, _ := ParseIPv4(c.pkt)
		if Checksum(c.pkt[:h.HeaderLen()]) != 0 {
			t.Fatal("ipv4 header checksum")
		}
		l4 := c.pkt[h.HeaderLen():]
		if h.Protocol == ProtoICMP && Checksum(l4) != 0 || h.Protocol != ProtoICMP && L4Checksum(h.Src, h.Dst, h.Protocol, l4) != 0 {
			t.Fatal("l4 checksum")
		}
		return
	}
	h, _ := ParseIPv6(c.pkt)
	if L4Checksum(h.Src, h.Dst, h.NextHeader, c.pkt[IPv6HeaderLen:]) != 0 {
		t.Fatal("l4 checksum")
	}
}

func TestBuildersDecodePlain(t *testing.T) {
	for _, c := range innerCases() {
		t.Run(c.name, func(t *testing.T) {
			verifyChecksums(t, c)
			if c.v4 {
				if _, err := Decode(c.pkt, false); !errors.Is(err, ErrNotIPv6) {
					t.Fatalf("ipv4 packet decoded as ipv6: %v", err)
				}
				return
			}
			p, err := Decode(c.pkt, false)
			if err != nil {
				t.Fatal(err)
			}
			if p.SRH != nil || p.SRHOff != -1 || p.Outer.HopLimit != DefaultHopLimit {
				t.Fatalf("plain packet: %+v", p)
			}
			checkInner(t, p, c, false)
		})
	}
}

func TestEncapDecode(t *testing.T) {
	tlv := TLV{Type: 0x7e, Value: []byte{1, 2, 3}}
	for _, c := range innerCases() {
		for _, eth := range []bool{false, true} {
			t.Run(c.name+map[bool]string{false: "", true: "/ether"}[eth], func(t *testing.T) {
				pkt, err := Encap(tunSrc, chain, c.pkt, tlv)
				if err != nil {
					t.Fatal(err)
				}
				frame := pkt
				if eth {
					frame = Ether(macB, macA, EtherTypeIPv6, pkt)
					frame = append(frame, 0, 0, 0, 0) // trailer (ethernet padding) is ignored
				}
				p, err := Decode(frame, eth)
				if err != nil {
					t.Fatal(err)
				}
				if eth != (p.Eth != nil) || eth && (p.Eth.EtherType != EtherTypeIPv6 || p.Eth.Src.String() != macA.String()) {
					t.Fatalf("ethernet: %+v", p.Eth)
				}
				wantNH := ProtoIPv6
				if c.v4 {
					wantNH = ProtoIPv4
				}
				o := p.Outer
				if o.Src != tunSrc || o.Dst != chain[0] || o.NextHeader != ProtoRouting || o.HopLimit != 64 ||
					int(o.PayloadLen) != len(pkt)-IPv6HeaderLen {
					t.Fatalf("outer %+v", o)
				}
				s := p.SRH
				if s == nil || s.NextHeader != wantNH || s.SegmentsLeft != 2 || s.LastEntry != 2 ||
					!slices.Equal(s.Travel(), chain) || len(s.TLVs) != 2 || s.TLVs[0].Type != 0x7e || s.TLVs[1].Type != TLVPadN {
					t.Fatalf("srh %+v", s)
				}
				if p.SRHOff != EthernetHeaderLen*btoi(eth)+IPv6HeaderLen {
					t.Fatalf("SRHOff %d", p.SRHOff)
				}
				checkInner(t, p, c, true)
				if p.Innermost() != map[bool]int{true: 4, false: 6}[c.v4] {
					t.Fatal("Innermost")
				}
				// The inner packet is carried byte for byte.
				if !bytes.Contains(pkt, c.pkt) || !bytes.Equal(pkt[len(pkt)-len(c.pkt):], c.pkt) {
					t.Fatal("inner bytes changed")
				}
			})
		}
	}
}

func TestInsertDecode(t *testing.T) {
	for _, c := range innerCases() {
		if c.v4 {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			pkt, err := Insert(c.pkt, chain[:2])
			if err != nil {
				t.Fatal(err)
			}
			p, err := Decode(pkt, false)
			if err != nil {
				t.Fatal(err)
			}
			s := p.SRH
			want := []netip.Addr{chain[0], chain[1], hostB}
			if p.Outer.Dst != chain[0] || p.Outer.Src != hostA || s == nil || s.SegmentsLeft != 2 || s.LastEntry != 2 ||
				!slices.Equal(s.Travel(), want) || s.NextHeader != c.l4.Proto || p.Inner6 != nil {
				t.Fatalf("inserted: outer %+v srh %+v", p.Outer, s)
			}
			checkInner(t, p, c, false)
			// Walking the list to the end restores the original destination;
			// the L4 checksum (over the original DA) is valid again there.
			for range 2 {
				if pkt, err = MutateEnd(pkt); err != nil {
					t.Fatal(err)
				}
			}
			p, _ = Decode(pkt, false)
			if p.Outer.Dst != hostB || L4Checksum(p.Outer.Src, p.Outer.Dst, c.l4.Proto, pkt[IPv6HeaderLen+s.Len():]) != 0 {
				t.Fatalf("at the end: %+v", p.Outer)
			}
		})
	}
}

func TestInsertAfterHopByHop(t *testing.T) {
	// IPv6 / Hop-by-Hop (8 bytes, PadN) / UDP.
	inner := UDP6(hostA, hostB, 1, 2, []byte("x"))
	hbh := []byte{ProtoUDP, 0, 1, 4, 0, 0, 0, 0}
	pkt := slices.Concat(inner[:IPv6HeaderLen], hbh, inner[IPv6HeaderLen:])
	pkt[6] = ProtoHopByHop
	pkt[5] += 8
	out, err := Insert(pkt, chain[:1])
	if err != nil {
		t.Fatal(err)
	}
	p, err := Decode(out, false)
	if err != nil {
		t.Fatal(err)
	}
	if out[6] != ProtoHopByHop || out[IPv6HeaderLen] != ProtoRouting || p.SRHOff != IPv6HeaderLen+8 ||
		len(p.Ext) != 1 || p.SRH.NextHeader != ProtoUDP || p.L4 == nil || p.L4.DstPort != 2 {
		t.Fatalf("decoded %+v ext %+v srh %+v", p, p.Ext, p.SRH)
	}
}

func TestDecodeExtensionHeaders(t *testing.T) {
	// IPv6 / HbH / DestOpts / SRH / IPv6 / DestOpts / UDP.
	in := UDP6(hostA, hostB, 5, 6, []byte("pay"))
	inDO := []byte{ProtoUDP, 0, 1, 4, 0, 0, 0, 0}
	in = slices.Concat(in[:IPv6HeaderLen], inDO, in[IPv6HeaderLen:])
	in[6], in[5] = ProtoDestOpts, in[5]+8
	pkt, err := Encap(tunSrc, chain, in)
	if err != nil {
		t.Fatal(err)
	}
	hbh := []byte{ProtoDestOpts, 0, 1, 4, 0, 0, 0, 0}
	do := []byte{ProtoRouting, 1, 1, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	pkt = slices.Concat(pkt[:IPv6HeaderLen], hbh, do, pkt[IPv6HeaderLen:])
	pkt[6], pkt[5] = ProtoHopByHop, pkt[5]+24
	p, err := Decode(pkt, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Ext) != 2 || p.Ext[0].Type != ProtoHopByHop || p.Ext[1].Type != ProtoDestOpts || len(p.Ext[1].Data) != 16 ||
		p.SRHOff != IPv6HeaderLen+24 || p.Inner6 == nil || p.L4 == nil || p.L4.SrcPort != 5 || string(p.Payload) != "pay" {
		t.Fatalf("decoded %+v", p)
	}
	if s, off, err := FindSRH(pkt); err != nil || off != p.SRHOff || s.SegmentsLeft != 2 {
		t.Fatalf("FindSRH = %v, %d, %v", s, off, err)
	}
	// A routing header of another type is kept as an extension header.
	rh0 := []byte{ProtoUDP, 0, 0, 0, 0, 0, 0, 0}
	u := UDP6(hostA, hostB, 5, 6, nil)
	u = slices.Concat(u[:IPv6HeaderLen], rh0, u[IPv6HeaderLen:])
	u[6], u[5] = ProtoRouting, u[5]+8
	p, err = Decode(u, false)
	if err != nil || p.SRH != nil || len(p.Ext) != 1 || p.L4 == nil || p.L4.DstPort != 6 {
		t.Fatalf("type 0 routing header: %+v, %v", p, err)
	}
	if _, _, err := FindSRH(u); !errors.Is(err, ErrBadRoutingType) {
		t.Fatalf("FindSRH on type 0: %v", err)
	}
}

func TestDecodeInnerFragment(t *testing.T) {
	in := UDP4(host4A, host4B, 1, 2, []byte("abcdefgh"))
	in[6], in[7] = 0, 1 // fragment offset 1 (8 bytes)
	pkt, _ := Encap(tunSrc, chain, in)
	p, err := Decode(pkt, false)
	if err != nil || p.Inner4 == nil || p.Inner4.FragOff != 1 || p.L4 != nil || len(p.Payload) != 16 {
		t.Fatalf("fragment: %+v, %v", p, err)
	}
}

func TestDecodeErrors(t *testing.T) {
	good, _ := Encap(tunSrc, chain, UDP6(hostA, hostB, 1, 2, []byte("x")))
	frame := Ether(macB, macA, EtherTypeIPv6, good)
	// Every strict prefix of a frame is truncated somewhere.
	for n := range len(frame) {
		if _, err := Decode(frame[:n], true); !errors.Is(err, ErrTruncated) {
			t.Fatalf("prefix %d: %v", n, err)
		}
	}
	tests := []struct {
		name   string
		mutate func(b []byte)
		want   error
		layer  string
		offset int
	}{
		{"ethertype ipv4", func(b []byte) { b[12], b[13] = 8, 0 }, ErrNotIPv6, "ethernet", 12},
		{"ip version 4", func(b []byte) { b[14] = 0x45 }, ErrNotIPv6, "ipv6", 14},
		{"payload length too long", func(b []byte) { b[14+4] = 0xff }, ErrTruncated, "ipv6", 18},
		{"srh sl over last", func(b []byte) { b[54+3] = 9 }, ErrSLOverLast, "srh", 57},
		{"srh too many segments", func(b []byte) { b[54+4] = 16 }, ErrTooManySegments, "srh", 58},
		{"srh hdr ext len", func(b []byte) { b[54+1] = 4 }, ErrBadHdrLen, "srh", 58},
		{"inner not ipv6", func(b []byte) { b[54+56] = 0x45 }, ErrNotIPv6, "ipv6", 110},
		{"inner payload length", func(b []byte) { b[54+56+5] = 200 }, ErrTruncated, "ipv6", 114},
		{"inner udp cut", func(b []byte) { b[54+56+5] = 4 }, ErrTruncated, "udp", 150 + 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := slices.Clone(frame)
			tt.mutate(b)
			_, err := Decode(b, true)
			var de *DecodeError
			if !errors.Is(err, tt.want) || !errors.As(err, &de) || de.Layer != tt.layer || de.Offset != tt.offset {
				t.Fatalf("err = %v (%#v), want %v in %s at %d", err, de, tt.want, tt.layer, tt.offset)
			}
		})
	}
	// Inner IPv4 whose total length overruns the outer payload.
	in4, _ := Encap(tunSrc, chain, UDP4(host4A, host4B, 1, 2, nil))
	in4[40+56+3] = 200
	if _, err := Decode(in4, false); !errors.Is(err, ErrTruncated) {
		t.Fatalf("ipv4 total length: %v", err)
	}
	// TCP data offset below 5 words.
	tc := TCP6(hostA, hostB, 1, 2, 0, nil)
	tc[40+12] = 0x40
	if _, err := Decode(tc, false); !errors.Is(err, ErrTruncated) {
		t.Fatalf("tcp data offset: %v", err)
	}
}

func TestEncapOptions(t *testing.T) {
	in := UDP6(hostA, hostB, 1, 2, nil)
	in[0], in[1] = 0x6b, 0x80 // traffic class 0xb8
	in[7] = 9
	pkt, err := EncapWith(EncapOptions{HopLimit: 64, FlowLabel: 0x12345, Inherit: true}, tunSrc, chain, in)
	if err != nil {
		t.Fatal(err)
	}
	o, _ := ParseIPv6(pkt)
	if o.TrafficClass != 0xb8 || o.HopLimit != 9 || o.FlowLabel != 0 {
		t.Fatalf("inherit: %+v", o)
	}
	// Reduced SRH: the first SID only in the DA.
	pkt, err = EncapWith(EncapOptions{HopLimit: 64, ReducedSRH: true}, tunSrc, chain, in)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Decode(pkt, false)
	if err != nil || p.Outer.Dst != chain[0] || p.SRH == nil || !slices.Equal(p.SRH.Travel(), chain[1:]) ||
		p.SRH.SegmentsLeft != 2 || p.SRH.LastEntry != 1 {
		t.Fatalf("reduced: %+v, %v", p.SRH, err)
	}
	if _, err := ParseSRH(pkt[IPv6HeaderLen:]); !errors.Is(err, ErrSLOverLast) {
		t.Fatalf("strict parse of a reduced srh: %v", err)
	}
	if _, err := p.SRH.Active(); err == nil {
		t.Fatal("Active of a reduced srh at its first SID")
	}
	// End walks a reduced SRH like a full one.
	for _, want := range chain[1:] {
		if pkt, err = MutateEnd(pkt); err != nil {
			t.Fatal(err)
		}
		if h, _ := ParseIPv6(pkt); h.Dst != want {
			t.Fatalf("after End: %v, want %v", h.Dst, want)
		}
	}
	// Reduced with one SID: plain IPv6-in-IPv6.
	pkt, _ = EncapWith(EncapOptions{HopLimit: 64, ReducedSRH: true}, tunSrc, chain[:1], in)
	p, err = Decode(pkt, false)
	if err != nil || p.SRH != nil || p.Outer.NextHeader != ProtoIPv6 || p.Inner6 == nil {
		t.Fatalf("reduced single: %+v, %v", p, err)
	}
	if _, err := EncapWith(EncapOptions{ReducedSRH: true}, tunSrc, chain[:1], in, TLV{Type: 9}); !errors.Is(err, ErrNoSegments) {
		t.Fatalf("reduced single with tlv: %v", err)
	}
}

func TestBuilderErrors(t *testing.T) {
	in := UDP6(hostA, hostB, 1, 2, nil)
	if _, err := Encap(tunSrc, nil, in); !errors.Is(err, ErrNoSegments) {
		t.Fatal(err)
	}
	if _, err := Encap(tunSrc, chain, []byte{0x10, 0}); !errors.Is(err, ErrBadInner) {
		t.Fatal(err)
	}
	if _, err := Encap(tunSrc, chain, nil); !errors.Is(err, ErrBadInner) {
		t.Fatal(err)
	}
	if _, err := Encap(tunSrc, chain, in, TLV{Type: 9, Value: make([]byte, 300)}); !errors.Is(err, ErrBadTLV) {
		t.Fatal(err)
	}
	if _, err := Encap(tunSrc, chain, append(in, make([]byte, 70000)...)); !errors.Is(err, ErrTooLong) {
		t.Fatal(err)
	}
	if _, err := Insert(in, nil); !errors.Is(err, ErrNoSegments) {
		t.Fatal(err)
	}
	if _, err := Insert(in[:20], chain); !errors.Is(err, ErrTruncated) {
		t.Fatal(err)
	}
	// Builders never panic on odd addresses: zero and wrong-family become zeros.
	b := UDP4(netip.Addr{}, hostB, 1, 2, nil)
	if h, err := ParseIPv4(b); err != nil || h.Src != netip.IPv4Unspecified() || h.Dst != netip.IPv4Unspecified() {
		t.Fatalf("UDP4 odd addrs: %+v, %v", h, err)
	}
	b = UDP6(netip.Addr{}, host4A, 1, 2, nil)
	if h, err := ParseIPv6(b); err != nil || h.Src != netip.IPv6Unspecified() || h.Dst != netip.MustParseAddr("::ffff:192.0.2.1") {
		t.Fatalf("UDP6 odd addrs: %+v, %v", h, err)
	}
	// The original packet is not modified by Insert / Encap.
	orig := slices.Clone(in)
	Insert(in, chain)
	Encap(tunSrc, chain, in)
	mustEq(t, "input", in, orig)
}

func TestPacketString(t *testing.T) {
	pkt, _ := Encap(tunSrc, chain[:2], UDP4(host4A, host4B, 1000, 53, []byte("hello")))
	p, err := Decode(pkt, false)
	if err != nil {
		t.Fatal(err)
	}
	want := "fc00:0:1::1 > fc00:1::e srh sl 1/1 [fc00:1::e fc00:2::e] | 192.0.2.1 > 198.51.100.7 udp 1000 > 53 len 5"
	if p.String() != want {
		t.Fatalf("String() =\n %s\nwant\n %s", p, want)
	}
}

func TestEncapL2(t *testing.T) {
	frame := Ether(macB, macA, EtherTypeIPv6, UDP6(hostA, hostB, 1, 2, []byte("l2")))
	pkt, err := EncapL2(tunSrc, chain, frame)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Decode(pkt, false)
	if err != nil {
		t.Fatal(err)
	}
	if p.SRH == nil || p.SRH.NextHeader != ProtoEthernet || p.Inner4 != nil || p.Inner6 != nil || p.L4 != nil || !bytes.Equal(p.Payload, frame) {
		t.Fatalf("decoded %v srh %+v", p, p.SRH)
	}
	if _, err := EncapL2(tunSrc, chain, frame[:10]); !errors.Is(err, ErrBadInner) {
		t.Fatal(err)
	}
	if _, err := EncapL2(tunSrc, nil, frame); !errors.Is(err, ErrNoSegments) {
		t.Fatal(err)
	}
}

func TestDecodeDestOptsAfterSRH(t *testing.T) {
	// IPv6 / SRH / DestOpts / UDP (insert mode with a destination option
	// for the final destination, RFC 8200 section 4.1).
	u := UDP6(hostA, hostB, 7, 8, []byte("d"))
	do := []byte{ProtoUDP, 0, 1, 4, 0, 0, 0, 0}
	u = slices.Concat(u[:IPv6HeaderLen], do, u[IPv6HeaderLen:])
	u[6], u[5] = ProtoDestOpts, u[5]+8
	pkt, err := Insert(u, chain[:1])
	if err != nil {
		t.Fatal(err)
	}
	p, err := Decode(pkt, false)
	if err != nil || p.SRH == nil || p.SRH.NextHeader != ProtoDestOpts || len(p.Ext) != 1 || p.Ext[0].Type != ProtoDestOpts ||
		p.L4 == nil || p.L4.DstPort != 8 || string(p.Payload) != "d" {
		t.Fatalf("decoded %v ext %+v, %v", p, p.Ext, err)
	}
	// A second SRH (nested policy) is kept raw; Hop-by-Hop after the
	// first header is not an extension header (it ends the walk).
	s2 := NewSRH(ProtoUDP, chain[:1])
	b2, _ := s2.Marshal()
	pkt2, _ := Insert(UDP6(hostA, hostB, 7, 8, nil), chain[:1])
	pkt2 = slices.Concat(pkt2[:IPv6HeaderLen+40], b2, pkt2[IPv6HeaderLen+40:])
	pkt2[IPv6HeaderLen], pkt2[5] = ProtoRouting, pkt2[5]+byte(len(b2))
	p, err = Decode(pkt2, false)
	if err != nil || p.SRHOff != IPv6HeaderLen || len(p.Ext) != 1 || p.Ext[0].Type != ProtoRouting || p.L4 == nil {
		t.Fatalf("nested srh: %v ext %+v, %v", p, p.Ext, err)
	}
	hbh := UDP6(hostA, hostB, 7, 8, nil)
	hbh = slices.Concat(hbh[:IPv6HeaderLen], []byte{ProtoHopByHop, 0, 1, 4, 0, 0, 0, 0}, []byte{ProtoUDP, 0, 1, 4, 0, 0, 0, 0}, hbh[IPv6HeaderLen:])
	hbh[6], hbh[5] = ProtoHopByHop, hbh[5]+16
	p, err = Decode(hbh, false)
	if err != nil || len(p.Ext) != 1 || p.L4 != nil {
		t.Fatalf("second hop-by-hop: %v ext %+v, %v", p, p.Ext, err)
	}
}
