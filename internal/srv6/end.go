package srv6

import (
	"errors"
	"fmt"

	"github.com/srchain/srchain/internal/drop"
)

// MaxExtHeaders is how many Hop-by-Hop / Destination Options headers
// FindSRH skips before giving up, as SRCHAIN_MAX_EXTHDRS in the eBPF
// srh_locate.
const MaxExtHeaders = 4

// FindSRH locates and validates (with ParseSRHReduced, as the kernel) the
// first SRH of the IPv6 packet pkt, skipping up to MaxExtHeaders
// Hop-by-Hop and Destination Options headers (RFC 8200 section 4.1) with
// WalkExt, the way the eBPF srh_locate does with ipv6_walk. It returns the
// SRH and its offset in pkt. No routing header: ErrNotSRv6; a routing
// header of another type: ErrBadRoutingType; an IPv6 payload length
// beyond the bytes given: ErrTruncated (the kernel's ipv6_rcv drops such
// packets before any SRv6 processing).
func FindSRH(pkt []byte) (SRH, int, error) {
	h, err := ParseIPv6(pkt)
	if err != nil {
		return SRH{}, 0, err
	}
	end := IPv6HeaderLen + int(h.PayloadLen)
	if end > len(pkt) {
		return SRH{}, 0, decodeErr("ipv6", "payload length", 4, ErrTruncated)
	}
	w := ExtWalk{Off: IPv6HeaderLen, NextHeader: h.NextHeader}
	if err := WalkExt(pkt[:end], &w, WalkOpts, MaxExtHeaders, 0); err != nil {
		return SRH{}, 0, err
	}
	off := w.Off
	if w.NextHeader != ProtoRouting {
		return SRH{}, 0, decodeErr("ipv6", "next header", off, ErrNotSRv6)
	}
	if off > end {
		return SRH{}, 0, decodeErr("srh", "fixed header", off, ErrTruncated)
	}
	s, err := ParseSRHReduced(pkt[off:end])
	if err != nil {
		return SRH{}, 0, rebase(err, off)
	}
	return s, off, nil
}

// MutateEnd applies the End behavior (RFC 8986 section 4.1) to the IPv6
// packet pkt and returns the result in a new slice: Segments Left - 1,
// destination = Segment List[SL], hop limit - 1. It is the reference model
// the eBPF End is compared against, so it drops what the kernel's
// seg6local End drops, in the kernel's order: no or invalid SRH (the
// DecodeError of FindSRH), SL = 0 (ErrSLZero; the kernel skips routing
// headers with SL 0 and finds none), then hop limit <= 1 (ErrHopLimit, the
// kernel's ip6_forward). Reason maps each error to its drop reason.
//
// Measured against Linux 6.18 seg6local End (TestMutateEndMatchesKernel):
// identical output bytes for every forwarded case (encap, insert, TLVs,
// extension headers, reduced SRH with SL = Last Entry + 1), the same
// verdict for every malformed case, and two known divergences: the kernel
// forwards SRHs with more than MaxSegments segments (the model, like the
// eBPF programs, drops them), and the kernel drops an SRH whose TLV area
// ends with a single Pad1 (its seg6_validate_srh reads every TLV as type
// + length; RFC 8754 section 2.1.1.1 makes Pad1 one byte). HMACs are not
// verified: the kernel (without keys) drops what SRH.KernelHMAC reports,
// the model forwards it.
func MutateEnd(pkt []byte) ([]byte, error) {
	s, off, err := FindSRH(pkt)
	if err != nil {
		return nil, fmt.Errorf("apply end: %w", err)
	}
	if s.SegmentsLeft == 0 {
		return nil, fmt.Errorf("apply end: %w", decodeErr("srh", "segments left", off+SRHOffSegmentsLeft, ErrSLZero))
	}
	if pkt[7] <= 1 {
		return nil, fmt.Errorf("apply end: %w", decodeErr("ipv6", "hop limit", 7, ErrHopLimit))
	}
	out := append([]byte(nil), pkt...)
	sl := s.SegmentsLeft - 1
	out[7]--
	out[off+SRHOffSegmentsLeft] = sl
	d := as16(s.Segments[sl])
	copy(out[24:40], d[:])
	return out, nil
}

// Reason is the datapath drop reason (internal/drop, bpf/lib/drop.h) that
// corresponds to a codec error; drop.None for nil, drop.Unsupported for
// errors the datapath has no name for.
func Reason(err error) drop.Reason {
	switch {
	case err == nil:
		return drop.None
	case errors.Is(err, ErrNotSRv6):
		return drop.NoSRH
	case errors.Is(err, ErrBadRoutingType):
		return drop.SRHBadType
	case errors.Is(err, ErrBadHdrLen):
		return drop.SRHBadLen
	case errors.Is(err, ErrSLOverLast):
		return drop.SRHSLOverLast
	case errors.Is(err, ErrTooManySegments):
		return drop.SRHTooManySegs
	case errors.Is(err, ErrBadTLV):
		return drop.TLVBad
	case errors.Is(err, ErrSLZero):
		return drop.SRHSLZero
	case errors.Is(err, ErrHopLimit):
		return drop.HopLimit
	case errors.Is(err, ErrTruncated):
		var de *DecodeError
		if errors.As(err, &de) && de.Layer == "srh" {
			return drop.SRHTruncated
		}
		return drop.PktTruncated
	}
	return drop.Unsupported
}

// MutateEndCSID is End with the NEXT-C-SID flavor
// (draft-ietf-spring-srv6-srh-compression section 4.1; the kernel's
// `flavors next-csid lblen L nflen N`): when the destination's argument
// (the bits behind the blockBits locator block and the nfBits node
// function) is non-zero, the next C-SID is shifted into place (CSIDNext)
// and the hop limit decremented, without looking at any SRH (pseudocode
// N01-N08); otherwise it is plain End (MutateEnd), moving to the next
// container in the SRH. Like the kernel (end_next_csid_core), a packet
// with a non-zero argument needs no SRH at all.
func MutateEndCSID(pkt []byte, blockBits, nfBits int) ([]byte, error) {
	h, err := ParseIPv6(pkt)
	if err != nil {
		return nil, fmt.Errorf("apply end next-csid: %w", err)
	}
	if IPv6HeaderLen+int(h.PayloadLen) > len(pkt) {
		return nil, fmt.Errorf("apply end next-csid: %w", decodeErr("ipv6", "payload length", 4, ErrTruncated))
	}
	next, ok := CSIDNext(h.Dst, blockBits, nfBits)
	if !ok {
		return MutateEnd(pkt)
	}
	if h.HopLimit <= 1 {
		return nil, fmt.Errorf("apply end next-csid: %w", decodeErr("ipv6", "hop limit", 7, ErrHopLimit))
	}
	out := append([]byte(nil), pkt...)
	out[7]--
	d := next.As16()
	copy(out[24:40], d[:])
	return out, nil
}
