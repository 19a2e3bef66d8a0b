package srv6

import (
	"encoding/binary"
	"fmt"
)

// ExtSet says which extension headers WalkExt steps over; it mirrors the
// which argument of ipv6_walk (bpf/lib/ipv6.h), the C side's one walker.
type ExtSet uint8

const (
	// WalkOpts steps over Hop-by-Hop and Destination Options only and
	// stops at the first routing header (RFC 8200 section 4.1 order):
	// the SRH locator (FindSRH, srh_locate).
	WalkOpts ExtSet = iota
	// WalkAll also steps over Routing, Fragment and AH headers, as
	// ip6tables' ipv6_find_hdr does to find the transport header (the
	// firewall's extraction).
	WalkAll
)

// ExtWalk is the state of WalkExt, as struct ipv6_walk: on entry the next
// header value and offset of the first header to look at; on return the
// first header not stepped over.
type ExtWalk struct {
	Off        int
	NextHeader uint8
	RoutingOff int  // first routing header seen, -1 if none (WalkAll only)
	NonFirst   bool // stopped behind a non-first fragment's header
}

// WalkExt steps over at most maxHdrs extension headers of pkt from w.Off,
// the Go twin of ipv6_walk: same set, same bounds, same verdicts, so the
// models agree with the datapath byte for byte. A Fragment header is 8
// bytes; a first fragment goes on to what it carries, a non-first
// fragment stops behind its header with NonFirst set (the protocol is
// known, the transport header is not there). AH lengths are in 4-octet
// units minus 2 (RFC 4302 section 2.2), the others in 8-octet units minus
// 1 (RFC 8200 section 4). A header whose first 2 bytes (8 for a fragment
// header) are cut, or that starts beyond maxOff (0: no limit), gives a
// DecodeError wrapping ErrTruncated; w then holds that header.
func WalkExt(pkt []byte, w *ExtWalk, set ExtSet, maxHdrs, maxOff int) error {
	w.RoutingOff, w.NonFirst = -1, false
	for i := 0; i < maxHdrs; i++ {
		nh := w.NextHeader
		if nh != ProtoHopByHop && nh != ProtoDestOpts &&
			(set == WalkOpts || nh != ProtoRouting && nh != ProtoFragment && nh != ProtoAH) {
			break
		}
		if maxOff != 0 && w.Off > maxOff || w.Off+2 > len(pkt) || nh == ProtoFragment && w.Off+8 > len(pkt) {
			return decodeErr("ipv6", fmt.Sprintf("extension header %d", nh), w.Off, ErrTruncated)
		}
		h := pkt[w.Off:]
		if nh == ProtoRouting && w.RoutingOff < 0 {
			w.RoutingOff = w.Off
		}
		w.NextHeader = h[0]
		switch nh {
		case ProtoFragment:
			w.Off += 8
			// Fragment Offset (13 bits) != 0: no transport header here.
			if binary.BigEndian.Uint16(h[2:4])&0xfff8 != 0 {
				w.NonFirst = true
				return nil
			}
		case ProtoAH:
			w.Off += (int(h[1]) + 2) * 4
		default:
			w.Off += (int(h[1]) + 1) * 8
		}
	}
	return nil
}
