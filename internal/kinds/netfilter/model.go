package netfilter

import (
	"encoding/binary"

	"github.com/srchain/srchain/internal/drop"
	"github.com/srchain/srchain/internal/srv6"
)

// MaxHdr is the largest outer header (IPv6 + SRH) the datapath stashes
// (ANF_MAX_HDR, bpf/lib/anf.h).
const MaxHdr = 384

// In is what srchain_anf_in does to an IPv6 packet (from its IPv6
// header on) addressed to an End.AN.NF SID: the Go model its BPF test-run
// tables are checked against.
type In struct {
	// Reason is the drop reason (drop.None: not dropped).
	Reason drop.Reason
	// ToKernel: hop limit exhausted, the packet goes unchanged to the
	// kernel's End (ICMPv6 Time Exceeded).
	ToKernel bool
	// Insert: the SRH is followed by anything but IPv4 / IPv6, so the
	// packet is H.Insert's (docs/netfilter.md "Insert mode").
	Insert bool
	// Stash is the outer header with End applied (hop limit - 1,
	// segments left - 1, DA = the new active segment, RFC 8986 4.1);
	// in insert mode the packet's IPv6 header and SRH, the same way.
	Stash []byte
	// Inner is the packet handed to netfilter. Encap mode: the inner
	// IPv4/IPv6 packet with its TTL / hop limit raised by one (unless
	// 255), since the kernel's forwarding lowers it once and End must
	// not. Insert mode: the original IPv6 packet: the SRH removed, DA =
	// segment 0, next header = the SRH's, hop limit as it arrived (the
	// forwarding's decrement is End's).
	Inner []byte
	// Arg is the low argsBits of the arriving DA (the mark's low bits).
	Arg uint32
}

// ModelIn runs End.AN.NF's first half on pkt.
func ModelIn(pkt []byte, argsBits int) In {
	if len(pkt) < 40 {
		return In{Reason: drop.PktTruncated}
	}
	// The IPv6 header first, as srchain_anf_in checks it: version and a
	// payload length (0, a jumbogram, is not served), the bytes it
	// announces present; bytes beyond it are trimmed (ip6_rcv_core).
	plen := int(binary.BigEndian.Uint16(pkt[4:6]))
	if pkt[0]>>4 != 6 || plen == 0 {
		return In{Reason: drop.Unsupported}
	}
	if len(pkt) < 40+plen {
		return In{Reason: drop.PktTruncated}
	}
	pkt = pkt[:40+plen]
	if pkt[6] != srv6.ProtoRouting {
		return In{Reason: drop.NoSRH} // other extension headers first: dropped too
	}
	s, off, err := srv6.FindSRH(pkt)
	if err != nil {
		return In{Reason: srv6.Reason(err)}
	}
	if s.SegmentsLeft == 0 {
		return In{Reason: drop.SRHSLZero}
	}
	hlen := off + (int(pkt[off+1])+1)*8
	// An HMAC TLV as the kernel finds it (srh_hmac_present: flag H, the
	// last 40 bytes of the SRH a type-5 TLV of length 38): not served.
	if srhLen := hlen - off; pkt[off+5]&srv6.SRHFlagHMAC != 0 && srhLen >= 8+(int(pkt[off+4])+1)*16+40 &&
		pkt[hlen-40] == srv6.TLVHMAC && pkt[hlen-39] == 38 {
		return In{Reason: drop.Unsupported}
	}
	nh := pkt[off]
	insert := nh != srv6.ProtoIPv4 && nh != srv6.ProtoIPv6
	if pkt[7] <= 1 {
		return In{ToKernel: true}
	}
	if hlen > MaxHdr {
		return In{Reason: drop.Unsupported}
	}
	need := 20
	switch {
	case insert:
		need = 0
	case nh == srv6.ProtoIPv6:
		need = 40
	}
	if len(pkt) < hlen+need {
		return In{Reason: drop.PktTruncated}
	}
	out, err := srv6.MutateEnd(pkt)
	if err != nil {
		return In{Reason: srv6.Reason(err)}
	}
	r := In{Stash: out[:hlen:hlen], Inner: append([]byte(nil), out[hlen:]...), Insert: insert}
	if argsBits > 0 {
		r.Arg = binary.BigEndian.Uint32(pkt[36:40]) & (1<<argsBits - 1)
	}
	if insert {
		// The original packet: IPv6 header as it arrived, DA =
		// segment 0, the SRH's next header, payload without the SRH.
		// The L4 checksum stays: H.Insert's sender computed it over
		// the final destination (RFC 8200 8.1).
		h := append([]byte(nil), pkt[:40]...)
		copy(h[24:40], pkt[off+8:off+24])
		h[6] = nh
		binary.BigEndian.PutUint16(h[4:], uint16(len(pkt)-hlen))
		r.Inner = append(h, pkt[hlen:]...)
		return r
	}
	if nh == srv6.ProtoIPv4 {
		if r.Inner[8] != 255 {
			// Incremental update of the header checksum (RFC 1624), as
			// bpf_l3_csum_replace does: the same as recomputing it for a
			// well-formed header, and defined for any IHL.
			old := binary.BigEndian.Uint16(r.Inner[8:10])
			r.Inner[8]++
			sum := uint32(^binary.BigEndian.Uint16(r.Inner[10:12])) + uint32(^old) + uint32(binary.BigEndian.Uint16(r.Inner[8:10]))
			for sum>>16 != 0 {
				sum = sum&0xffff + sum>>16
			}
			binary.BigEndian.PutUint16(r.Inner[10:], ^uint16(sum))
		}
	} else if r.Inner[7] != 255 {
		r.Inner[7]++
	}
	return r
}

// ModelOut is srchain_anf_out's restore: the stashed outer header in
// front of the inner packet as netfilter left it (NAT may have resized
// it), with the payload length and the SRH's next header fixed. In
// insert mode (see ModelOutInsert) only the stashed SRH comes back.
func ModelOut(stash, inner []byte, insert bool) []byte {
	if insert {
		return ModelOutInsert(stash, inner)
	}
	out := append(append([]byte(nil), stash...), inner...)
	binary.BigEndian.PutUint16(out[4:], uint16(len(out)-40))
	nh := byte(srv6.ProtoIPv6)
	if len(inner) > 0 && inner[0]>>4 == 4 {
		nh = srv6.ProtoIPv4
	}
	out[40] = nh
	return out
}

// ModelOutInsert is the restore of an insert-mode packet: pkt is the
// IPv6 packet as netfilter left it (source and destination possibly
// NAT'd, hop limit lowered by the forwarding). The stashed SRH (End
// applied) goes back behind its fixed header with segment 0 = pkt's
// destination and its next header = pkt's; DA = the next SID (the
// stash's DA), or segment 0 when segments left is now 0; the rest of
// the IPv6 header is pkt's. Nothing else changes: the L4 checksum covers
// segment 0, the final destination (RFC 8200 8.1).
func ModelOutInsert(stash, pkt []byte) []byte {
	srh := append([]byte(nil), stash[40:]...)
	copy(srh[8:24], pkt[24:40])
	srh[0] = pkt[6]
	out := append(append(append([]byte(nil), pkt[:40]...), srh...), pkt[40:]...)
	out[6] = srv6.ProtoRouting
	if srh[3] != 0 {
		copy(out[24:40], stash[24:40])
	}
	binary.BigEndian.PutUint16(out[4:], uint16(len(out)-40))
	return out
}

// MoreFragments reports whether the inner packet (IPv4 or IPv6, as it
// reaches srchain_anf_out) is a fragment other than the last of its
// datagram: IPv4 MF set (RFC 791), or an IPv6 Fragment header with M set
// (RFC 8200 4.5) behind at most fragScan Hop-by-Hop / Destination
// Options / Routing headers. Its restore leaves the stash slot live for
// the next piece; the last piece (or an unfragmented packet) consumes it
// (docs/netfilter.md "Fragments").
func MoreFragments(inner []byte) bool {
	if len(inner) < 20 {
		return false
	}
	if inner[0]>>4 == 4 {
		return binary.BigEndian.Uint16(inner[6:])&0x2000 != 0
	}
	if len(inner) < 40 {
		return false
	}
	nh, off := inner[6], 40
	for range fragScan {
		if off+4 > len(inner) {
			return false
		}
		switch nh {
		case srv6.ProtoFragment:
			return inner[off+3]&1 != 0
		case srv6.ProtoHopByHop, srv6.ProtoDestOpts, srv6.ProtoRouting:
			nh, off = inner[off], off+(int(inner[off+1])+1)*8
		default:
			return false
		}
	}
	return false
}

// fragScan is ANF_FRAG_SCAN (bpf/anf.c): extension headers stepped over
// to find a Fragment header.
const fragScan = 6
