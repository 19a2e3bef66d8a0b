package srv6

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
)

// RoutingTypeSRH is the routing type of the SRH (RFC 8754 section 2).
const RoutingTypeSRH = 4

// MaxSegments is the most segments ParseSRH accepts (Last Entry <= 15).
// It equals SRCHAIN_MAX_SEGS of the eBPF programs, which must bound their
// loops; 16 SIDs is already past any header budget seed 004 considers.
const MaxSegments = 16

// MaxTLVs is the most TLVs ParseSRH accepts in one SRH, padding included;
// it equals SRCHAIN_MAX_TLVS of the eBPF TLV walk.
const MaxTLVs = 16

// SRHFixedLen is the length of the SRH before the segment list.
const SRHFixedLen = 8

// Byte offsets of the SRH fields, for tests that corrupt one field.
const (
	SRHOffNextHeader   = 0
	SRHOffHdrExtLen    = 1
	SRHOffRoutingType  = 2
	SRHOffSegmentsLeft = 3
	SRHOffLastEntry    = 4
	SRHOffFlags        = 5
	SRHOffTag          = 6
	SRHOffSegments     = 8
)

// SRHFlagHMAC is the H flag (bit 4 of the flags byte, linux/seg6.h
// SR6_FLAG1_HMAC, from draft-ietf-6man-segment-routing-header before RFC
// 8754 left the flags unassigned): the kernel looks for an HMAC TLV only
// when it is set.
const SRHFlagHMAC = 0x08

// SRH TLV types (RFC 8754 section 2.1; IANA "Segment Routing Header TLVs").
const (
	TLVPad1 uint8 = 0
	TLVPadN uint8 = 4
	TLVHMAC uint8 = 5
)

// TLV is one SRH TLV. Pad1 (type 0) is a single byte with no length and
// no value; every other type is type, length, value. Values are kept as
// opaque bytes, padding included, so that re-encoding is exact.
type TLV struct {
	Type  uint8
	Value []byte
}

// wireLen is the encoded length of t.
func (t TLV) wireLen() int {
	if t.Type == TLVPad1 {
		return 1
	}
	return 2 + len(t.Value)
}

// HMACTLV is the decoded value of an HMAC TLV (RFC 8754 section 2.1.2).
type HMACTLV struct {
	DFlag bool // destination address verification disabled
	KeyID uint32
	HMAC  []byte
}

// HMAC decodes t as an HMAC TLV.
func (t TLV) HMAC() (HMACTLV, error) {
	if t.Type != TLVHMAC || len(t.Value) < 6 {
		return HMACTLV{}, decodeErr("srh", "hmac tlv", 0, ErrBadTLV)
	}
	return HMACTLV{
		DFlag: t.Value[0]&0x80 != 0,
		KeyID: binary.BigEndian.Uint32(t.Value[2:6]),
		HMAC:  t.Value[6:],
	}, nil
}

// KernelHMAC returns the HMAC TLV the Linux kernel would verify in s
// (seg6_get_tlv_hmac): flag H set and the last 40 bytes of the SRH a type
// 5 TLV of length 38. With the default seg6_require_hmac = 0 the kernel
// drops such a packet unless it holds the key; MutateEnd does not model
// HMAC verification.
func (s SRH) KernelHMAC() (HMACTLV, bool) {
	if s.Flags&SRHFlagHMAC == 0 || len(s.TLVs) == 0 {
		return HMACTLV{}, false
	}
	t := s.TLVs[len(s.TLVs)-1]
	if t.Type != TLVHMAC || len(t.Value) != 38 || padLen(s.tlvLen()) != 0 {
		return HMACTLV{}, false
	}
	h, err := t.HMAC()
	return h, err == nil
}

// TLV encodes h as an HMAC TLV.
func (h HMACTLV) TLV() TLV {
	v := make([]byte, 6, 6+len(h.HMAC))
	if h.DFlag {
		v[0] = 0x80
	}
	binary.BigEndian.PutUint32(v[2:6], h.KeyID)
	return TLV{Type: TLVHMAC, Value: append(v, h.HMAC...)}
}

// SRH is a Segment Routing Header (RFC 8754 section 2). Segments are in
// wire order: Segments[0] is the last segment of the path, and the active
// segment is Segments[SegmentsLeft].
type SRH struct {
	NextHeader   uint8
	HdrExtLen    uint8 // as read; AppendTo computes it
	RoutingType  uint8
	SegmentsLeft uint8
	LastEntry    uint8
	Flags        uint8
	Tag          uint16
	Segments     []netip.Addr
	TLVs         []TLV
}

// NewSRH builds a valid SRH for the segment list travel (first SID visited
// first): Segments is travel reversed, SL = Last Entry = len(travel)-1.
func NewSRH(nextHeader uint8, travel []netip.Addr) SRH {
	segs := slices.Clone(travel)
	slices.Reverse(segs)
	le := uint8(max(len(segs)-1, 0))
	return SRH{
		NextHeader:   nextHeader,
		RoutingType:  RoutingTypeSRH,
		SegmentsLeft: le,
		LastEntry:    le,
		Segments:     segs,
	}
}

// Active is the active segment, Segments[SegmentsLeft]. It fails on a
// reduced SRH whose active segment is not in the list.
func (s SRH) Active() (netip.Addr, error) {
	if int(s.SegmentsLeft) >= len(s.Segments) {
		return netip.Addr{}, fmt.Errorf("get active segment %d of %d: %w", s.SegmentsLeft, len(s.Segments), ErrSLOverLast)
	}
	return s.Segments[s.SegmentsLeft], nil
}

// Travel is the segment list in travel order (Segments reversed).
func (s SRH) Travel() []netip.Addr {
	t := slices.Clone(s.Segments)
	slices.Reverse(t)
	return t
}

// tlvLen is the length of the TLVs as stored, padLen the padding AppendTo adds.
func (s SRH) tlvLen() (n int) {
	for _, t := range s.TLVs {
		n += t.wireLen()
	}
	return n
}

func padLen(n int) int { return (8 - n%8) % 8 }

// Len is the encoded length in bytes: (Hdr Ext Len + 1) * 8.
func (s SRH) Len() int {
	t := s.tlvLen()
	return SRHFixedLen + 16*len(s.Segments) + t + padLen(t)
}

// AppendTo appends the encoded SRH to b. Hdr Ext Len is computed and the
// TLV area is padded to a multiple of 8 bytes with Pad1 or PadN (RFC 8754
// section 2.1.1); all other fields are written as stored, so deliberately
// inconsistent headers (SL > Last Entry, a wrong routing type) can be built
// for drop tests. It fails only for what the wire cannot carry.
func (s SRH) AppendTo(b []byte) ([]byte, error) {
	n := s.Len()
	if n > 8*256 {
		return b, fmt.Errorf("encode srh of %d bytes: %w", n, ErrTooLong)
	}
	for i, t := range s.TLVs {
		if t.Type == TLVPad1 && len(t.Value) != 0 {
			return b, fmt.Errorf("encode srh tlv %d: pad1 with a value: %w", i, ErrBadTLV)
		}
		if len(t.Value) > 255 {
			return b, fmt.Errorf("encode srh tlv %d: value of %d bytes: %w", i, len(t.Value), ErrBadTLV)
		}
	}
	b = slices.Grow(b, n)
	b = append(b, s.NextHeader, uint8(n/8-1), s.RoutingType, s.SegmentsLeft, s.LastEntry, s.Flags)
	b = binary.BigEndian.AppendUint16(b, s.Tag)
	for _, a := range s.Segments {
		a16 := as16(a)
		b = append(b, a16[:]...)
	}
	for _, t := range s.TLVs {
		b = appendTLV(b, t)
	}
	switch p := padLen(s.tlvLen()); {
	case p == 1:
		b = append(b, TLVPad1)
	case p > 1:
		b = appendTLV(b, TLV{Type: TLVPadN, Value: make([]byte, p-2)})
	}
	return b, nil
}

func appendTLV(b []byte, t TLV) []byte {
	if t.Type == TLVPad1 {
		return append(b, TLVPad1)
	}
	b = append(b, t.Type, uint8(len(t.Value)))
	return append(b, t.Value...)
}

// Marshal is AppendTo(nil).
func (s SRH) Marshal() ([]byte, error) { return s.AppendTo(nil) }

// ParseSRH decodes the SRH at the start of b, reading exactly
// (Hdr Ext Len + 1) * 8 bytes, and validates it strictly. The checks run
// in the order of srchain's eBPF srh_validate (bpf/lib/srh.h), so that a
// header with several faults yields the same reason in both: fixed part
// present, routing type 4, whole header present, Last Entry <
// MaxSegments, Last Entry <= Hdr Ext Len/2 - 1, Segments Left <= Last
// Entry, then a TLV area made of at most MaxTLVs whole TLVs. Offsets in
// errors are relative to b.
//
// Segments Left = Last Entry + 1 is rejected here, so that Active always
// works on a parsed SRH, although RFC 8754 section 4.3.1.1 and RFC 8986
// section 4.1 (S06/S09) allow it and the kernel and srh_validate accept
// it: it is the reduced SRH of H.Encaps.Red (RFC 8986 section 5.2), whose
// first SID is only in the destination address. ParseSRHReduced (used by
// Decode, FindSRH and MutateEnd) accepts it.
func ParseSRH(b []byte) (SRH, error) { return parseSRH(b, false) }

// ParseSRHReduced is ParseSRH that also accepts Segments Left = Last
// Entry + 1 (a reduced SRH, RFC 8986 sections 4.1 S09 and 5.2), as the
// kernel's seg6local End does. Active fails on such an SRH: the active
// segment is only in the destination address.
func ParseSRHReduced(b []byte) (SRH, error) { return parseSRH(b, true) }

func parseSRH(b []byte, reduced bool) (SRH, error) {
	if len(b) < SRHFixedLen {
		return SRH{}, decodeErr("srh", "fixed header", len(b), ErrTruncated)
	}
	s := SRH{
		NextHeader:   b[SRHOffNextHeader],
		HdrExtLen:    b[SRHOffHdrExtLen],
		RoutingType:  b[SRHOffRoutingType],
		SegmentsLeft: b[SRHOffSegmentsLeft],
		LastEntry:    b[SRHOffLastEntry],
		Flags:        b[SRHOffFlags],
		Tag:          binary.BigEndian.Uint16(b[SRHOffTag:]),
	}
	if s.RoutingType != RoutingTypeSRH {
		return SRH{}, decodeErr("srh", "routing type", SRHOffRoutingType, ErrBadRoutingType)
	}
	n := (int(s.HdrExtLen) + 1) * 8
	if len(b) < n {
		return SRH{}, decodeErr("srh", "hdr ext len", SRHOffHdrExtLen, ErrTruncated)
	}
	b = b[:n]
	nseg := int(s.LastEntry) + 1
	if nseg > MaxSegments {
		return SRH{}, decodeErr("srh", "last entry", SRHOffLastEntry, ErrTooManySegments)
	}
	if int(s.HdrExtLen)/2 < nseg {
		return SRH{}, decodeErr("srh", "last entry", SRHOffLastEntry, ErrBadHdrLen)
	}
	if int(s.SegmentsLeft) > int(s.LastEntry)+btoi(reduced) {
		return SRH{}, decodeErr("srh", "segments left", SRHOffSegmentsLeft, ErrSLOverLast)
	}
	s.Segments = make([]netip.Addr, nseg)
	for i := range s.Segments {
		o := SRHOffSegments + 16*i
		s.Segments[i] = netip.AddrFrom16([16]byte(b[o : o+16]))
	}
	for o := SRHOffSegments + 16*nseg; o < n; {
		if len(s.TLVs) == MaxTLVs {
			return SRH{}, decodeErr("srh", "tlv count", o, ErrBadTLV)
		}
		if b[o] == TLVPad1 {
			s.TLVs = append(s.TLVs, TLV{Type: TLVPad1})
			o++
			continue
		}
		if o+2 > n || o+2+int(b[o+1]) > n {
			return SRH{}, decodeErr("srh", "tlv", o, ErrBadTLV)
		}
		t := TLV{Type: b[o], Value: append([]byte{}, b[o+2:o+2+int(b[o+1])]...)}
		s.TLVs = append(s.TLVs, t)
		o += t.wireLen()
	}
	return s, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
