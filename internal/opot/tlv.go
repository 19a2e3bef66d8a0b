package opot

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/srchain/srchain/internal/srv6"
)

// TLVType is the SRH TLV type of the OPoT TLV: 252, the first of the
// "Experimentation and Test" values 252-254 of the IANA "Segment Routing
// Header TLVs" registry (RFC 8754 section 8.2). Its high bit is set as it
// must be: RND and CML change at every hop (RFC 8754 section 2.1,
// 128-255 = "may change en route"). Not PadN (4), not HMAC (5), and not
// 124-126, the experimental values for TLVs that do not change.
const TLVType uint8 = 252

// TLVLen is the OPoT TLV's size on the wire, a multiple of 8 so that the
// SRH stays 8-octet aligned without padding (seed 003 Fig. 6):
//
//	offset 0  type (252)
//	offset 1  length (22: the bytes after this one)
//	offset 2  slot: 0 or 1, the profile slot that made the TLV
//	offset 3  reserved, 5 bytes, zero
//	offset 8  RND, 8 bytes, big-endian, masked by the sender's c^r
//	offset 16 CML, 8 bytes, big-endian, masked by the sender's c^CML
const TLVLen = 24

// tlvValueLen is the TLV's Length field (RFC 8754: excluding type and
// length).
const tlvValueLen = TLVLen - 2

// Offsets of the fields from the TLV's first byte, for the C twin and
// for tests that corrupt one field.
const (
	OffSlot = 2
	OffRND  = 8
	OffCML  = 16
)

// Slots is the number of profile slots per chain (rotation, issue 11).
const Slots = 2

// SlotUnfilled in the slot byte marks an OPoT TLV that a kernel encap
// route reserved for the headend stage to fill (docs/opot.md "Headend
// behind the kernel's encap"). No transit or verifier accepts it: a
// packet that left the headend unfilled fails at the verifier.
const SlotUnfilled uint8 = 0xff

// padNLen is the PadN TLV that follows a reserved OPoT TLV.
const padNLen = 8

// ReservedLen is the TLV area of a route's reservation (Reservation).
const ReservedLen = TLVLen + padNLen

// Reservation returns the TLV area srchain's kernel H.Encaps route of an
// OPoT chain carries after its segments: the OPoT TLV unfilled, then an
// 8-byte PadN (RFC 8754 section 2.1.1.2). The kernel copies it into every
// packet it encapsulates, so the headend stage only writes the TLV in
// place instead of growing the SRH. The PadN is there because
// vishvananda/netlink reads a route's SRH back as whole 16-byte segments
// and fails on any other length: 32 bytes read back as two "segments"
// (apply compares them as such).
func Reservation() []byte {
	b := append([]byte(nil), TLVType, tlvValueLen, SlotUnfilled)
	b = append(b, make([]byte, TLVLen-3)...)
	return append(b, srv6.TLVPadN, padNLen-2, 0, 0, 0, 0, 0, 0)
}

// ErrTLV: bytes that claim to be an OPoT TLV are not a valid one (wrong
// type or length, truncated, reserved bytes set, slot out of range), or
// an SRH carries more than one.
var ErrTLV = errors.New("malformed opot tlv")

// ErrNoTLV: an SRH carries no OPoT TLV.
var ErrNoTLV = errors.New("no opot tlv")

// Meta is the OPoT TLV as it is on the wire: RND and CML are masked by
// the last node that ciphered them.
type Meta struct {
	Slot uint8
	RND  uint64
	CML  uint64
}

// AppendTo appends the 24-byte TLV.
func (m Meta) AppendTo(b []byte) []byte {
	b = append(b, TLVType, tlvValueLen, m.Slot, 0, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint64(b, m.RND)
	return binary.BigEndian.AppendUint64(b, m.CML)
}

// SRv6TLV returns the TLV in the form of internal/srv6, for building
// packets with srv6.Encap.
func (m Meta) SRv6TLV() srv6.TLV {
	return srv6.TLV{Type: TLVType, Value: m.AppendTo(nil)[2:]}
}

// ParseTLV decodes the OPoT TLV at the start of b (more bytes may
// follow: the rest of the TLV area). It never panics.
func ParseTLV(b []byte) (Meta, error) {
	if len(b) < 2 || b[0] != TLVType {
		return Meta{}, fmt.Errorf("parse opot tlv: not type %d: %w", TLVType, ErrTLV)
	}
	if b[1] != tlvValueLen {
		return Meta{}, fmt.Errorf("parse opot tlv: length %d, want %d: %w", b[1], tlvValueLen, ErrTLV)
	}
	if len(b) < TLVLen {
		return Meta{}, fmt.Errorf("parse opot tlv: %d bytes, want %d: %w", len(b), TLVLen, ErrTLV)
	}
	return parseValue(b[2:TLVLen])
}

// parseValue decodes the 22 bytes after type and length.
func parseValue(v []byte) (Meta, error) {
	if len(v) != tlvValueLen {
		return Meta{}, fmt.Errorf("parse opot tlv: value of %d bytes, want %d: %w", len(v), tlvValueLen, ErrTLV)
	}
	if v[0] >= Slots {
		return Meta{}, fmt.Errorf("parse opot tlv: slot %d: %w", v[0], ErrTLV)
	}
	for _, r := range v[1:6] {
		if r != 0 {
			return Meta{}, fmt.Errorf("parse opot tlv: reserved bytes set: %w", ErrTLV)
		}
	}
	return Meta{
		Slot: v[0],
		RND:  binary.BigEndian.Uint64(v[OffRND-2:]),
		CML:  binary.BigEndian.Uint64(v[OffCML-2:]),
	}, nil
}

// FindTLV returns the OPoT TLV of an SRH and its index in s.TLVs. An SRH
// with two OPoT TLVs is malformed: which one a node would update is
// otherwise a choice an attacker makes.
func FindTLV(s srv6.SRH) (Meta, int, error) {
	idx := -1
	for i, t := range s.TLVs {
		if t.Type != TLVType {
			continue
		}
		if idx >= 0 {
			return Meta{}, -1, fmt.Errorf("find opot tlv: two of them: %w", ErrTLV)
		}
		idx = i
	}
	if idx < 0 {
		return Meta{}, -1, ErrNoTLV
	}
	m, err := parseValue(s.TLVs[idx].Value)
	if err != nil {
		return Meta{}, -1, err
	}
	return m, idx, nil
}

// EncapOverhead is the bytes H.Encaps adds with m segments and a TLV
// area of tlvs bytes: outer IPv6 (40) + SRH (8 + 16m) + tlvs. With the
// OPoT TLV alone (TLVLen, what srchain's eBPF ingress writes) it is
// 72 + 16m, the figure of seed 003 V-B1; behind the kernel's encap the
// route's reservation adds its PadN (ReservedLen).
func EncapOverhead(segments, tlvs int) int {
	return 40 + srv6.SRHFixedLen + 16*segments + tlvs
}

// TCPMSS is the largest IPv6 TCP MSS that fits the link MTU once the
// packet is encapsulated with m segments and a TLV area of tlvs bytes:
// MTU - 60 - EncapOverhead (seed 003 V-B1 and Table III: with the OPoT
// TLV, 1288 for m = 5, 1352 for one compressed-SID container).
func TCPMSS(mtu, segments, tlvs int) int {
	return mtu - 40 - 20 - EncapOverhead(segments, tlvs)
}
