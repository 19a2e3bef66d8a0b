package srv6

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// ExtHeader is an IPv6 extension header other than the SRH, kept raw.
type ExtHeader struct {
	Type uint8  // the next-header value that announced it
	Data []byte // the whole header, next header and length bytes included
}

// L4 is the transport header of the innermost packet.
type L4 struct {
	Proto            uint8 // ProtoTCP, ProtoUDP, ProtoICMP or ProtoICMPv6
	SrcPort, DstPort uint16
	TCPFlags         uint8
	ICMPType         uint8
	ICMPCode         uint8
	ICMPID, ICMPSeq  uint16 // echo request/reply only
	Checksum         uint16
}

// Packet is the decoded view of one frame. Outer is the first IPv6 header;
// SRH is the first Segment Routing Header behind it (nil if none), parsed
// with ParseSRHReduced so that H.Encaps.Red packets decode; Inner4
// or Inner6 is the encapsulated packet (H.Encaps), nil when the transport
// header follows the SRH directly (H.Insert) or there is no SRH; L4 is the
// transport header of the innermost packet (nil if none was recognised,
// or the packet is a non-first fragment); Payload is what follows it
// (or the undecoded rest).
type Packet struct {
	Eth    *Ethernet
	Outer  IPv6
	Ext    []ExtHeader // outer extension headers other than the SRH, in order
	SRH    *SRH
	SRHOff int // offset of the SRH in the frame, -1 if none
	Inner4 *IPv4
	Inner6 *IPv6
	// InnerOff is the offset of Inner4/Inner6 in the frame (-1 if none).
	InnerOff int
	L4       *L4
	Payload  []byte
}

// outerExtStart is the frame offset right behind the outer IPv6 header.
func (p Packet) outerExtStart() int {
	if p.Eth != nil {
		return p.Eth.Len() + IPv6HeaderLen
	}
	return IPv6HeaderLen
}

// Innermost returns the protocol of the innermost IP packet: 4, 6.
func (p Packet) Innermost() int {
	if p.Inner4 != nil {
		return 4
	}
	return 6
}

// Decode decodes an IPv6 packet (with its Ethernet header when
// withEthernet), walking Hop-by-Hop and Destination Options headers (RFC
// 8200 section 4.1), the first SRH, an encapsulated IPv4/IPv6 packet and
// its transport header. Error offsets are relative to frame.
func Decode(frame []byte, withEthernet bool) (Packet, error) {
	p := Packet{SRHOff: -1, InnerOff: -1}
	off := 0
	if withEthernet {
		e, err := ParseEthernet(frame)
		if err != nil {
			return p, err
		}
		if e.EtherType != EtherTypeIPv6 {
			return p, decodeErr("ethernet", "ethertype", e.Len()-2, ErrNotIPv6)
		}
		p.Eth = &e
		off = e.Len()
	}
	h, err := ParseIPv6(frame[off:])
	if err != nil {
		return p, rebase(err, off)
	}
	p.Outer = h
	end, err := payloadEnd(frame, off, h)
	if err != nil {
		return p, err
	}
	off += IPv6HeaderLen
	nh := h.NextHeader
	// Outer extension headers in RFC 8200 section 4.1 order (Hop-by-Hop
	// only first, Destination Options, Routing, Destination Options): the
	// first SRH is decoded, every other extension header is kept raw in Ext.
	// A Fragment header ends the walk (the rest is Payload).
	for nh == ProtoHopByHop && off == p.outerExtStart() || nh == ProtoDestOpts || nh == ProtoRouting {
		if nh == ProtoRouting && p.SRH == nil && off+3 <= end && frame[off+2] == RoutingTypeSRH {
			s, err := ParseSRHReduced(frame[off:end])
			if err != nil {
				return p, rebase(err, off)
			}
			p.SRH, p.SRHOff = &s, off
			off += s.Len()
			nh = s.NextHeader
			continue
		}
		x, next, err := extHeader(frame[:end], off, nh)
		if err != nil {
			return p, err
		}
		p.Ext = append(p.Ext, x)
		off, nh = next, x.Data[0]
	}
	switch nh {
	case ProtoIPv6:
		i, err := ParseIPv6(frame[off:end])
		if err != nil {
			return p, rebase(err, off)
		}
		p.Inner6, p.InnerOff = &i, off
		iend, err := payloadEnd(frame[:end], off, i)
		if err != nil {
			return p, err
		}
		off += IPv6HeaderLen
		nh = i.NextHeader
		// Inner extension headers are skipped, not kept.
		for nh == ProtoHopByHop || nh == ProtoDestOpts || nh == ProtoRouting {
			x, next, err := extHeader(frame[:iend], off, nh)
			if err != nil {
				return p, err
			}
			off, nh = next, x.Data[0]
		}
		end = iend
	case ProtoIPv4:
		i, err := ParseIPv4(frame[off:end])
		if err != nil {
			return p, rebase(err, off)
		}
		p.Inner4, p.InnerOff = &i, off
		if int(i.TotalLen) < i.HeaderLen() || off+int(i.TotalLen) > end {
			return p, decodeErr("ipv4", "total length", off+2, ErrTruncated)
		}
		end = off + int(i.TotalLen)
		off += i.HeaderLen()
		nh = i.Protocol
		if i.FragOff != 0 {
			p.Payload = frame[off:end]
			return p, nil
		}
	}
	l4, n, err := parseL4(frame[off:end], nh)
	if err != nil {
		return p, rebase(err, off)
	}
	p.L4 = l4
	p.Payload = frame[off+n : end]
	return p, nil
}

// payloadEnd is where the IPv6 packet at off ends, from its payload length.
func payloadEnd(frame []byte, off int, h IPv6) (int, error) {
	end := off + IPv6HeaderLen + int(h.PayloadLen)
	if end > len(frame) {
		return 0, decodeErr("ipv6", "payload length", off+4, ErrTruncated)
	}
	return end, nil
}

// extHeader reads the generic extension header at off (RFC 8200 section
// 4: next header, length in 8-byte units not counting the first 8).
func extHeader(b []byte, off int, typ uint8) (ExtHeader, int, error) {
	if off+8 > len(b) {
		return ExtHeader{}, 0, decodeErr("ipv6", fmt.Sprintf("extension header %d", typ), off, ErrTruncated)
	}
	n := (int(b[off+1]) + 1) * 8
	if off+n > len(b) {
		return ExtHeader{}, 0, decodeErr("ipv6", fmt.Sprintf("extension header %d length", typ), off+1, ErrTruncated)
	}
	return ExtHeader{Type: typ, Data: b[off : off+n]}, off + n, nil
}

// parseL4 decodes a TCP, UDP, ICMP or ICMPv6 header; other protocols give
// a nil L4 and consume nothing.
func parseL4(b []byte, proto uint8) (*L4, int, error) {
	l := &L4{Proto: proto}
	switch proto {
	case ProtoUDP:
		if len(b) < UDPHeaderLen {
			return nil, 0, decodeErr("udp", "header", len(b), ErrTruncated)
		}
		l.SrcPort = binary.BigEndian.Uint16(b[0:])
		l.DstPort = binary.BigEndian.Uint16(b[2:])
		l.Checksum = binary.BigEndian.Uint16(b[6:])
		return l, UDPHeaderLen, nil
	case ProtoTCP:
		if len(b) < TCPMinHeaderLen {
			return nil, 0, decodeErr("tcp", "header", len(b), ErrTruncated)
		}
		hl := int(b[12]>>4) * 4
		if hl < TCPMinHeaderLen || hl > len(b) {
			return nil, 0, decodeErr("tcp", "data offset", 12, ErrTruncated)
		}
		l.SrcPort = binary.BigEndian.Uint16(b[0:])
		l.DstPort = binary.BigEndian.Uint16(b[2:])
		l.TCPFlags = b[13]
		l.Checksum = binary.BigEndian.Uint16(b[16:])
		return l, hl, nil
	case ProtoICMP, ProtoICMPv6:
		if len(b) < ICMPHeaderLen {
			return nil, 0, decodeErr("icmp", "header", len(b), ErrTruncated)
		}
		l.ICMPType, l.ICMPCode = b[0], b[1]
		l.Checksum = binary.BigEndian.Uint16(b[2:])
		if isEcho(proto, l.ICMPType) {
			l.ICMPID = binary.BigEndian.Uint16(b[4:])
			l.ICMPSeq = binary.BigEndian.Uint16(b[6:])
		}
		return l, ICMPHeaderLen, nil
	}
	return nil, 0, nil
}

// ICMP echo types (RFC 792, RFC 4443 section 4).
const (
	ICMP4EchoRequest = 8
	ICMP4EchoReply   = 0
	ICMP6EchoRequest = 128
	ICMP6EchoReply   = 129
)

func isEcho(proto, typ uint8) bool {
	if proto == ProtoICMP {
		return typ == ICMP4EchoRequest || typ == ICMP4EchoReply
	}
	return typ == ICMP6EchoRequest || typ == ICMP6EchoReply
}

// String is a one-line summary for logs and test failures, e.g.
// "fc00::1 > fc00:1::e srh sl 2/2 [fc00:1::e fc00:2::e] | 192.0.2.1 > 198.51.100.7 udp 1000 > 53 len 5".
func (p Packet) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v > %v", p.Outer.Src, p.Outer.Dst)
	if p.SRH != nil {
		fmt.Fprintf(&b, " srh sl %d/%d %v", p.SRH.SegmentsLeft, p.SRH.LastEntry, p.SRH.Travel())
		if len(p.SRH.TLVs) > 0 {
			fmt.Fprintf(&b, " tlvs %d", len(p.SRH.TLVs))
		}
	}
	switch {
	case p.Inner6 != nil:
		fmt.Fprintf(&b, " | %v > %v", p.Inner6.Src, p.Inner6.Dst)
	case p.Inner4 != nil:
		fmt.Fprintf(&b, " | %v > %v", p.Inner4.Src, p.Inner4.Dst)
	}
	if l := p.L4; l != nil {
		switch l.Proto {
		case ProtoUDP:
			fmt.Fprintf(&b, " udp %d > %d", l.SrcPort, l.DstPort)
		case ProtoTCP:
			fmt.Fprintf(&b, " tcp %d > %d flags %#02x", l.SrcPort, l.DstPort, l.TCPFlags)
		case ProtoICMP:
			fmt.Fprintf(&b, " icmp type %d code %d", l.ICMPType, l.ICMPCode)
		case ProtoICMPv6:
			fmt.Fprintf(&b, " icmp6 type %d code %d", l.ICMPType, l.ICMPCode)
		}
	}
	fmt.Fprintf(&b, " len %d", len(p.Payload))
	return b.String()
}
