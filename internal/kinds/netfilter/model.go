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
	// Stash is the outer header with End applied (hop limit - 1,
	// segments left - 1, DA = the new active segment, RFC 8986 4.1).
	Stash []byte
	// Inner is the packet handed to netfilter: the inner IPv4/IPv6
	// packet with its TTL / hop limit raised by one (unless 255), since
	// the kernel's forwarding lowers it once and End must not.
	Inner []byte
	// Arg is the low argsBits of the arriving DA (the mark's low bits).
	Arg uint32
}

// ModelIn runs End.AN.NF's first half on pkt.
func ModelIn(pkt []byte, argsBits int) In {
	if len(pkt) < 40 {
		return In{Reason: drop.PktTruncated}
	}
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
	nh := pkt[off]
	if nh != srv6.ProtoIPv4 && nh != srv6.ProtoIPv6 {
		return In{Reason: drop.Unsupported}
	}
	if pkt[7] <= 1 {
		return In{ToKernel: true}
	}
	if hlen > MaxHdr {
		return In{Reason: drop.Unsupported}
	}
	need := 20
	if nh == srv6.ProtoIPv6 {
		need = 40
	}
	if len(pkt) < hlen+need {
		return In{Reason: drop.PktTruncated}
	}
	out, err := srv6.MutateEnd(pkt)
	if err != nil {
		return In{Reason: srv6.Reason(err)}
	}
	r := In{Stash: out[:hlen:hlen], Inner: append([]byte(nil), out[hlen:]...)}
	if argsBits > 0 {
		r.Arg = binary.BigEndian.Uint32(pkt[36:40]) & (1<<argsBits - 1)
	}
	if nh == srv6.ProtoIPv4 {
		if r.Inner[8] != 255 {
			r.Inner[8]++
			ihl := int(r.Inner[0]&0x0f) * 4
			binary.BigEndian.PutUint16(r.Inner[10:], 0)
			binary.BigEndian.PutUint16(r.Inner[10:], srv6.Checksum(r.Inner[:ihl]))
		}
	} else if r.Inner[7] != 255 {
		r.Inner[7]++
	}
	return r
}

// ModelOut is srchain_anf_out's restore: the stashed outer header in
// front of the inner packet as netfilter left it (NAT may have resized
// it), with the payload length and the SRH's next header fixed.
func ModelOut(stash, inner []byte) []byte {
	out := append(append([]byte(nil), stash...), inner...)
	binary.BigEndian.PutUint16(out[4:], uint16(len(out)-40))
	nh := byte(srv6.ProtoIPv6)
	if len(inner) > 0 && inner[0]>>4 == 4 {
		nh = srv6.ProtoIPv4
	}
	out[40] = nh
	return out
}
