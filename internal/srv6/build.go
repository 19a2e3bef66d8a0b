package srv6

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// TCP flag bits (RFC 9293 section 3.1).
const (
	TCPFin uint8 = 1 << iota
	TCPSyn
	TCPRst
	TCPPsh
	TCPAck
	TCPUrg
)

// ip6 wraps an upper-layer segment in an IPv6 header (hop limit 64) and
// fills the segment's checksum at csumOff.
func ip6(src, dst netip.Addr, proto uint8, l4 []byte, csumOff int) []byte {
	h := IPv6{PayloadLen: uint16(len(l4)), NextHeader: proto, HopLimit: DefaultHopLimit, Src: src, Dst: dst}
	c := L4Checksum(src, dst, proto, l4)
	if proto == ProtoUDP && c == 0 {
		c = 0xFFFF // RFC 768: a computed 0 is sent as all ones
	}
	binary.BigEndian.PutUint16(l4[csumOff:], c)
	return append(h.AppendTo(make([]byte, 0, IPv6HeaderLen+len(l4))), l4...)
}

// ip4 wraps an upper-layer segment in an IPv4 header (TTL 64, DF clear)
// and fills the segment's checksum at csumOff; pseudo says whether the
// checksum covers the pseudo-header (TCP, UDP) or not (ICMP).
func ip4(src, dst netip.Addr, proto uint8, l4 []byte, csumOff int, pseudo bool) []byte {
	h := IPv4{TotalLen: uint16(IPv4MinHeaderLen + len(l4)), TTL: DefaultHopLimit, Protocol: proto, Src: src, Dst: dst}
	var c uint16
	if pseudo {
		c = L4Checksum(src, dst, proto, l4)
		if proto == ProtoUDP && c == 0 {
			c = 0xFFFF
		}
	} else {
		c = Checksum(l4)
	}
	binary.BigEndian.PutUint16(l4[csumOff:], c)
	return append(h.AppendTo(make([]byte, 0, IPv4MinHeaderLen+len(l4))), l4...)
}

func udp(sport, dport uint16, payload []byte) []byte {
	b := make([]byte, UDPHeaderLen, UDPHeaderLen+len(payload))
	binary.BigEndian.PutUint16(b[0:], sport)
	binary.BigEndian.PutUint16(b[2:], dport)
	binary.BigEndian.PutUint16(b[4:], uint16(UDPHeaderLen+len(payload)))
	return append(b, payload...)
}

// tcp is a 20-byte TCP header, sequence number 1, ack 1 when ACK is set,
// window 65535.
func tcp(sport, dport uint16, flags uint8, payload []byte) []byte {
	b := make([]byte, TCPMinHeaderLen, TCPMinHeaderLen+len(payload))
	binary.BigEndian.PutUint16(b[0:], sport)
	binary.BigEndian.PutUint16(b[2:], dport)
	binary.BigEndian.PutUint32(b[4:], 1)
	if flags&TCPAck != 0 {
		binary.BigEndian.PutUint32(b[8:], 1)
	}
	b[12] = 5 << 4
	b[13] = flags
	binary.BigEndian.PutUint16(b[14:], 0xFFFF)
	return append(b, payload...)
}

func echo(typ uint8, id, seq uint16, payload []byte) []byte {
	b := make([]byte, ICMPHeaderLen, ICMPHeaderLen+len(payload))
	b[0] = typ
	binary.BigEndian.PutUint16(b[4:], id)
	binary.BigEndian.PutUint16(b[6:], seq)
	return append(b, payload...)
}

// UDP6 is an IPv6/UDP packet with correct checksum, hop limit 64.
func UDP6(src, dst netip.Addr, sport, dport uint16, payload []byte) []byte {
	return ip6(src, dst, ProtoUDP, udp(sport, dport, payload), 6)
}

// UDP4 is an IPv4/UDP packet with correct checksums, TTL 64.
func UDP4(src, dst netip.Addr, sport, dport uint16, payload []byte) []byte {
	return ip4(src, dst, ProtoUDP, udp(sport, dport, payload), 6, true)
}

// TCP6 is an IPv6/TCP segment (no options) with correct checksum.
func TCP6(src, dst netip.Addr, sport, dport uint16, flags uint8, payload []byte) []byte {
	return ip6(src, dst, ProtoTCP, tcp(sport, dport, flags, payload), 16)
}

// TCP4 is an IPv4/TCP segment (no options) with correct checksums.
func TCP4(src, dst netip.Addr, sport, dport uint16, flags uint8, payload []byte) []byte {
	return ip4(src, dst, ProtoTCP, tcp(sport, dport, flags, payload), 16, true)
}

// ICMP6Echo is an ICMPv6 echo request (RFC 4443 section 4.1).
func ICMP6Echo(src, dst netip.Addr, id, seq uint16) []byte {
	return ICMP6EchoData(src, dst, id, seq, nil)
}

// ICMP6EchoData is ICMP6Echo carrying data.
func ICMP6EchoData(src, dst netip.Addr, id, seq uint16, data []byte) []byte {
	return ip6(src, dst, ProtoICMPv6, echo(ICMP6EchoRequest, id, seq, data), 2)
}

// ICMP4Echo is an ICMP echo request (RFC 792).
func ICMP4Echo(src, dst netip.Addr, id, seq uint16) []byte {
	return ICMP4EchoData(src, dst, id, seq, nil)
}

// ICMP4EchoData is ICMP4Echo carrying data.
func ICMP4EchoData(src, dst netip.Addr, id, seq uint16, data []byte) []byte {
	return ip4(src, dst, ProtoICMP, echo(ICMP4EchoRequest, id, seq, data), 2, false)
}

// Encap is H.Encaps (RFC 8986 section 5.1): inner (an IPv4 or IPv6
// packet) behind a new IPv6 header from outerSrc to the first SID of
// travel and an SRH holding travel (SL = Last Entry = len(travel)-1) and
// tlvs. The SRH next header is 41 for IPv6, 4 for IPv4. The outer header
// has hop limit 64, traffic class and flow label 0; EncapWith sets them.
func Encap(outerSrc netip.Addr, travel []netip.Addr, inner []byte, tlvs ...TLV) ([]byte, error) {
	return EncapWith(EncapOptions{HopLimit: DefaultHopLimit}, outerSrc, travel, inner, tlvs...)
}

// EncapOptions are the outer-header fields of EncapWith.
type EncapOptions struct {
	HopLimit     uint8
	TrafficClass uint8
	FlowLabel    uint32
	// Inherit copies the traffic class, flow label and hop limit of an
	// IPv6 inner packet, as the Linux kernel's seg6 encap does with its
	// default seg6_flowlabel = 0 (seg6_do_srh_encap); it overrides the
	// fields above for IPv6 inner packets.
	Inherit bool
	// ReducedSRH omits the first SID from the SRH (H.Encaps.Red, RFC 8986
	// section 5.2): Last Entry = len(travel)-2 and Segments Left =
	// len(travel)-1, one past the list, since the active SID is only in
	// the destination address. A single SID gives no SRH.
	ReducedSRH bool
}

// EncapWith is Encap with the outer header fields given by o.
func EncapWith(o EncapOptions, outerSrc netip.Addr, travel []netip.Addr, inner []byte, tlvs ...TLV) ([]byte, error) {
	switch {
	case len(inner) > 0 && inner[0]>>4 == 6:
		return encap(o, outerSrc, travel, inner, ProtoIPv6, tlvs)
	case len(inner) > 0 && inner[0]>>4 == 4:
		return encap(o, outerSrc, travel, inner, ProtoIPv4, tlvs)
	}
	return nil, fmt.Errorf("encapsulate: %w", ErrBadInner)
}

// EncapL2 is H.Encaps.L2 (RFC 8986 section 5.3): the Ethernet frame behind
// an outer IPv6 header and an SRH with next header 143 (Ethernet), as the
// kernel's seg6 mode l2encap does and End.DX2 expects. Hop limit 64.
func EncapL2(outerSrc netip.Addr, travel []netip.Addr, frame []byte, tlvs ...TLV) ([]byte, error) {
	if len(frame) < EthernetHeaderLen {
		return nil, fmt.Errorf("encapsulate frame of %d bytes: %w", len(frame), ErrBadInner)
	}
	return encap(EncapOptions{HopLimit: DefaultHopLimit}, outerSrc, travel, frame, ProtoEthernet, tlvs)
}

func encap(o EncapOptions, outerSrc netip.Addr, travel []netip.Addr, inner []byte, nh uint8, tlvs []TLV) ([]byte, error) {
	if len(travel) == 0 {
		return nil, fmt.Errorf("encapsulate: %w", ErrNoSegments)
	}
	outer := IPv6{TrafficClass: o.TrafficClass, FlowLabel: o.FlowLabel, HopLimit: o.HopLimit, Src: outerSrc, Dst: travel[0]}
	if o.Inherit && nh == ProtoIPv6 {
		if ih, err := ParseIPv6(inner); err == nil {
			outer.TrafficClass, outer.FlowLabel, outer.HopLimit = ih.TrafficClass, ih.FlowLabel, ih.HopLimit
		}
	}
	segs := travel
	if o.ReducedSRH {
		segs = travel[1:]
	}
	var srh []byte
	if len(segs) == 0 && len(tlvs) > 0 {
		return nil, fmt.Errorf("encapsulate: tlvs without an srh: %w", ErrNoSegments)
	}
	if len(segs) > 0 {
		s := NewSRH(nh, segs)
		s.TLVs = tlvs
		if o.ReducedSRH {
			s.SegmentsLeft++
		}
		var err error
		if srh, err = s.AppendTo(nil); err != nil {
			return nil, fmt.Errorf("encapsulate: %w", err)
		}
		outer.NextHeader = ProtoRouting
	} else {
		outer.NextHeader = nh
	}
	plen := len(srh) + len(inner)
	if plen > 0xFFFF {
		return nil, fmt.Errorf("encapsulate %d bytes: %w", plen, ErrTooLong)
	}
	outer.PayloadLen = uint16(plen)
	b := make([]byte, 0, IPv6HeaderLen+plen)
	b = outer.AppendTo(b)
	b = append(b, srh...)
	return append(b, inner...), nil
}

// Insert is H.Insert: an SRH inserted into the IPv6 packet pkt, behind the
// fixed header and a Hop-by-Hop header if there is one (RFC 8200 section
// 4.1 order; the kernel's seg6 inline mode always inserts right behind the
// fixed header). Segment List[0] is the original destination, the others
// travel reversed, SL = Last Entry = len(travel); the destination becomes
// travel[0]. The SRH next header is what followed the insertion point.
func Insert(pkt []byte, travel []netip.Addr, tlvs ...TLV) ([]byte, error) {
	if len(travel) == 0 {
		return nil, fmt.Errorf("insert srh: %w", ErrNoSegments)
	}
	h, err := ParseIPv6(pkt)
	if err != nil {
		return nil, fmt.Errorf("insert srh: %w", err)
	}
	at, nhOff := IPv6HeaderLen, 6
	if h.NextHeader == ProtoHopByHop {
		_, next, err := extHeader(pkt, IPv6HeaderLen, ProtoHopByHop)
		if err != nil {
			return nil, fmt.Errorf("insert srh: %w", err)
		}
		at, nhOff = next, IPv6HeaderLen
	}
	s := NewSRH(pkt[nhOff], append(travel[:len(travel):len(travel)], h.Dst))
	s.TLVs = tlvs
	srh, err := s.AppendTo(nil)
	if err != nil {
		return nil, fmt.Errorf("insert srh: %w", err)
	}
	plen := int(h.PayloadLen) + len(srh)
	if plen > 0xFFFF {
		return nil, fmt.Errorf("insert srh: payload of %d bytes: %w", plen, ErrTooLong)
	}
	b := make([]byte, 0, len(pkt)+len(srh))
	b = append(b, pkt[:at]...)
	b = append(b, srh...)
	b = append(b, pkt[at:]...)
	b[nhOff] = ProtoRouting
	binary.BigEndian.PutUint16(b[4:], uint16(plen))
	d := as16(travel[0])
	copy(b[24:40], d[:])
	return b, nil
}
