package srv6

import (
	"encoding/binary"
	"net/netip"
)

// Checksum is the Internet checksum (RFC 1071) of b: the value to store in
// a zeroed checksum field, or 0 when b already holds a correct checksum.
func Checksum(b []byte) uint16 {
	return fold(sum(0, b))
}

// L4Checksum is the TCP/UDP/ICMPv6 checksum of the segment l4 (header and
// data) with the pseudo-header of src, dst and proto: RFC 8200 section 8.1
// when the addresses are IPv6, RFC 793/768 when both are IPv4. As with
// Checksum, a segment whose checksum field is zeroed yields the value to
// store, a segment with a correct checksum yields 0. (ICMPv4 has no
// pseudo-header: use Checksum.)
func L4Checksum(src, dst netip.Addr, proto uint8, l4 []byte) uint16 {
	var s uint32
	if src.Unmap().Is4() && dst.Unmap().Is4() {
		a, b := as4(src), as4(dst)
		s = sum(s, a[:])
		s = sum(s, b[:])
		s += uint32(proto) + uint32(len(l4))
	} else {
		a, b := as16(src), as16(dst)
		s = sum(s, a[:])
		s = sum(s, b[:])
		s += uint32(len(l4)>>16) + uint32(len(l4)&0xFFFF) + uint32(proto)
	}
	return fold(sum(s, l4))
}

func sum(s uint32, b []byte) uint32 {
	for len(b) >= 2 {
		s += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
		if s >= 1<<31 { // fold early so long buffers cannot overflow
			s = s&0xFFFF + s>>16
		}
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	return s
}

func fold(s uint32) uint16 {
	for s > 0xFFFF {
		s = s&0xFFFF + s>>16
	}
	return ^uint16(s)
}
