package srv6

import (
	"errors"
	"fmt"
)

// Decode errors. Every decode error is a *DecodeError wrapping one of these.
var (
	// ErrTruncated: the bytes end before the header (or a length it
	// announces) does.
	ErrTruncated = errors.New("truncated")
	// ErrBadRoutingType: a routing header whose type is not 4 (RFC 8754 section 2).
	ErrBadRoutingType = errors.New("routing type is not 4")
	// ErrBadHdrLen: Hdr Ext Len too short for Last Entry + 1 segments
	// (RFC 8754 section 4.3.1.1: "max_last_entry = (Hdr Ext Len / 2) - 1").
	ErrBadHdrLen = errors.New("hdr ext len inconsistent with last entry")
	// ErrSLOverLast: Segments Left > Last Entry (ParseSRH, as srchain's
	// eBPF validator) or > Last Entry + 1 (ParseSRHReduced, as RFC 8754
	// section 4.3.1.1 and the kernel).
	ErrSLOverLast = errors.New("segments left exceeds last entry")
	// ErrTooManySegments: Last Entry + 1 > MaxSegments.
	ErrTooManySegments = errors.New("too many segments")
	// ErrBadTLV: the SRH TLV area is not a sequence of whole TLVs filling it
	// exactly (RFC 8754 section 2.1), or a known TLV has a bad length.
	ErrBadTLV = errors.New("malformed tlv")
	// ErrNotIPv6: IP version is not 6 or EtherType is not 0x86DD.
	ErrNotIPv6 = errors.New("not ipv6")
	// ErrNotSRv6: the IPv6 packet carries no Segment Routing Header.
	ErrNotSRv6 = errors.New("no segment routing header")
	// ErrNotIPv4: IP version is not 4 or IHL < 5.
	ErrNotIPv4 = errors.New("not ipv4")
)

// Errors of the End reference model (MutateEnd) and of the builders.
var (
	// ErrSLZero: End on an SRH whose Segments Left is already 0 (RFC 8986
	// section 4.1 S02-S04: the SRH is exhausted; the kernel's End drops).
	ErrSLZero = errors.New("segments left is zero")
	// ErrHopLimit: hop limit <= 1 (RFC 8986 section 4.1 S05-S07).
	ErrHopLimit = errors.New("hop limit exceeded")
	// ErrNoSegments: a builder was given an empty segment list.
	ErrNoSegments = errors.New("empty segment list")
	// ErrTooLong: a header or packet would exceed what its length field holds.
	ErrTooLong = errors.New("too long")
	// ErrBadInner: Encap was given bytes that are neither IPv4 nor IPv6.
	ErrBadInner = errors.New("inner packet is neither ipv4 nor ipv6")
	// ErrBadSIDFormat: a LOC:FUNCT:ARGS format that does not fit 128 bits.
	ErrBadSIDFormat = errors.New("bad sid format")
	// ErrSIDOverflow: a locator, function or argument wider than its field.
	ErrSIDOverflow = errors.New("value does not fit its sid field")
)

// DecodeError says where decoding failed: the layer ("ipv6", "srh", ...),
// the field, and the byte offset of the field from the start of the buffer
// handed to the parser (for Decode, from the start of the frame).
type DecodeError struct {
	Layer  string
	Field  string
	Offset int
	Err    error
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("decode %s %s at offset %d: %v", e.Layer, e.Field, e.Offset, e.Err)
}

// Unwrap returns the sentinel.
func (e *DecodeError) Unwrap() error { return e.Err }

func decodeErr(layer, field string, off int, err error) error {
	return &DecodeError{Layer: layer, Field: field, Offset: off, Err: err}
}

// rebase shifts the offset of a *DecodeError by base, so that errors of a
// parser run on a sub-slice point into the whole frame.
func rebase(err error, base int) error {
	var de *DecodeError
	if errors.As(err, &de) {
		c := *de
		c.Offset += base
		return &c
	}
	return err
}
