package srv6

import (
	"encoding/binary"
	"fmt"
)

// Builders for packets a hostile network sends: IPv4 options and
// fragments, IPv6 extension-header chains. They rewrite a packet made by
// the builders above (UDP4, TCP6, ...), keep its lengths and the IPv4
// header checksum right and leave the transport checksum as it was (a
// router does not check it). Tests draw from them at random to compare
// srchain's datapath with the kernel's on every class, not only on the
// packets the datapath handles.

// Extension header types (RFC 8200 4; RFC 4302 for AH).
const (
	ExtHopByHop = 0
	ExtRouting  = 43
	ExtFragment = 44
	ExtAH       = 51
	ExtDestOpts = 60
)

// ExtHdr is one IPv6 extension header: its type and its bytes after the
// next-header octet (the length octet included), which WithExtHeaders
// completes.
type ExtHdr struct {
	Type uint8
	Body []byte
}

// OptsHdr is a Hop-by-Hop or Destination Options header of 8*(1+units)
// bytes filled with PadN (RFC 8200 4.2).
func OptsHdr(typ uint8, units int) ExtHdr {
	b := make([]byte, 8*(1+units)-1)
	b[0] = byte(units)
	b[1] = 1 // PadN
	b[2] = byte(len(b) - 3)
	return ExtHdr{Type: typ, Body: b}
}

// FragHdr is a Fragment header (RFC 8200 4.5): offset in 8-octet units,
// the M flag, an identification.
func FragHdr(offset uint16, more bool, id uint32) ExtHdr {
	b := make([]byte, 7)
	v := offset << 3
	if more {
		v |= 1
	}
	binary.BigEndian.PutUint16(b[1:], v)
	binary.BigEndian.PutUint32(b[3:], id)
	return ExtHdr{Type: ExtFragment, Body: b}
}

// AHHdr is an Authentication Header (RFC 4302 2) with a 12-byte ICV.
func AHHdr(spi, seq uint32) ExtHdr {
	b := make([]byte, 23)
	b[0] = 4 // payload length: 6 words - 2
	binary.BigEndian.PutUint32(b[3:], spi)
	binary.BigEndian.PutUint32(b[7:], seq)
	return ExtHdr{Type: ExtAH, Body: b}
}

// RoutingHdr is a routing header of the given type, segments left and
// last entry with n addresses (an SRH when typ is 4; sl > last is
// malformed by RFC 8754 4.3.1.1).
func RoutingHdr(typ, sl, last uint8, n int) ExtHdr {
	b := make([]byte, 7+16*n)
	b[0] = byte(2 * n)
	b[1] = typ
	b[2] = sl
	b[3] = last
	for i := 0; i < n; i++ {
		b[7+16*i] = 0xfc
		b[7+16*i+15] = byte(i + 1)
	}
	return ExtHdr{Type: ExtRouting, Body: b}
}

// WithExtHeaders puts hdrs, in order, between the fixed IPv6 header of
// p and its payload.
func WithExtHeaders(p []byte, hdrs ...ExtHdr) ([]byte, error) {
	if len(p) < IPv6HeaderLen || p[0]>>4 != 6 {
		return nil, fmt.Errorf("add extension headers: %w: not an IPv6 packet", ErrBadInner)
	}
	out := append([]byte(nil), p[:IPv6HeaderLen]...)
	last := p[6]
	prev := 6 // offset of the next-header octet to point at each header
	for _, h := range hdrs {
		out[prev] = h.Type
		prev = len(out)
		out = append(out, last)
		out = append(out, h.Body...)
	}
	out[prev] = last
	out = append(out, p[IPv6HeaderLen:]...)
	n := len(out) - IPv6HeaderLen
	if n > 0xffff {
		return nil, fmt.Errorf("add extension headers: %w: payload of %d bytes", ErrTooLong, n)
	}
	binary.BigEndian.PutUint16(out[4:], uint16(n))
	return out, nil
}

// WithIPv4Options puts opts (padded with End of Options List to a
// multiple of 4, at most 40 bytes) into the IPv4 header of p.
func WithIPv4Options(p, opts []byte) ([]byte, error) {
	if len(p) < IPv4MinHeaderLen || p[0]>>4 != 4 || p[0]&0xf != 5 {
		return nil, fmt.Errorf("add IPv4 options: %w: not an IPv4 packet without options", ErrBadInner)
	}
	o := append([]byte(nil), opts...)
	for len(o)%4 != 0 {
		o = append(o, 0)
	}
	if len(o) > 40 {
		return nil, fmt.Errorf("add IPv4 options: %w: %d bytes of options", ErrTooLong, len(o))
	}
	out := append(append(append([]byte(nil), p[:IPv4MinHeaderLen]...), o...), p[IPv4MinHeaderLen:]...)
	out[0] = 4<<4 | byte(5+len(o)/4)
	binary.BigEndian.PutUint16(out[2:], uint16(len(out)))
	SetIPv4Checksum(out)
	return out, nil
}

// IPv4Fragment sets the fragment offset (8-octet units) and the MF flag
// of p's IPv4 header, keeping DF as it was.
func IPv4Fragment(p []byte, offset uint16, more bool) []byte {
	out := append([]byte(nil), p...)
	v := binary.BigEndian.Uint16(out[6:])&0x4000 | offset&0x1fff
	if more {
		v |= 0x2000
	}
	binary.BigEndian.PutUint16(out[6:], v)
	SetIPv4Checksum(out)
	return out
}

// SetIPv4Checksum recomputes the header checksum of the IPv4 packet p.
func SetIPv4Checksum(p []byte) {
	ihl := int(p[0]&0xf) * 4
	if ihl < IPv4MinHeaderLen || ihl > len(p) {
		return
	}
	binary.BigEndian.PutUint16(p[10:], 0)
	binary.BigEndian.PutUint16(p[10:], Checksum(p[:ihl]))
}
