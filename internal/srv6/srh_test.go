package srv6

import (
	"bytes"
	"errors"
	"net/netip"
	"slices"
	"testing"
)

func TestSRHWireFormat(t *testing.T) {
	// Two segments, no TLVs: RFC 8754 section 2 layout by hand.
	s := NewSRH(ProtoIPv6, addrs(t, "fc00:1::1, fc00:2::2"))
	s.Flags, s.Tag = 0x00, 0xbeef
	b, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want := unhex(t, `29 04 04 01 01 00 beef
		fc000002000000000000000000000002
		fc000001000000000000000000000001`)
	mustEq(t, "srh", b, want)
	if s.Len() != len(want) {
		t.Fatalf("Len %d, want %d", s.Len(), len(want))
	}
	a, err := s.Active()
	if err != nil || a != netip.MustParseAddr("fc00:1::1") {
		t.Fatalf("Active = %v, %v", a, err)
	}
	if got := s.Travel(); !slices.Equal(got, addrs(t, "fc00:1::1, fc00:2::2")) {
		t.Fatalf("Travel = %v", got)
	}
}

func TestSRHRoundTrip(t *testing.T) {
	segs := addrs(t, "fc00:1::e, fc00:2::e, fc00:3::e, fc00:4::e, fc00:5::d6")
	hmac := HMACTLV{DFlag: true, KeyID: 7, HMAC: bytes.Repeat([]byte{0xab}, 32)}.TLV()
	tests := []struct {
		name    string
		n       int
		tlvs    []TLV
		wantLen int
		wantPad []uint8 // TLV types AppendTo adds, in order (re-parsed)
	}{
		{"one segment", 1, nil, 24, nil},
		{"five segments", 5, nil, 88, nil},
		{"sixteen segments", 16, nil, 8 + 256, nil},
		{"tlv needing pad1", 2, []TLV{{Type: 0x7c, Value: []byte{1, 2, 3, 4, 5}}}, 48, []uint8{0x7c, TLVPad1}},
		{"tlv needing padn", 2, []TLV{{Type: 0x7c, Value: []byte{1}}}, 48, []uint8{0x7c, TLVPadN}},
		{"aligned tlv", 2, []TLV{{Type: 0x7c, Value: make([]byte, 6)}}, 48, []uint8{0x7c}},
		{"hmac", 3, []TLV{hmac}, 8 + 48 + 40, []uint8{TLVHMAC}},
		{"explicit padding kept", 1, []TLV{{Type: TLVPad1}, {Type: TLVPadN, Value: []byte{0, 0, 0, 0}}, {Type: TLVPad1}}, 32, []uint8{TLVPad1, TLVPadN, TLVPad1}},
		{"empty value", 1, []TLV{{Type: 9}}, 32, []uint8{9, TLVPadN}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			travel := segs
			if tt.n > len(segs) {
				travel = nil
				for i := range tt.n {
					travel = append(travel, netip.AddrFrom16([16]byte{0xfc, 15: byte(i + 1)}))
				}
			}
			travel = travel[:tt.n]
			s := NewSRH(ProtoIPv4, travel)
			s.Flags, s.Tag, s.TLVs = 0x40, 0x1234, tt.tlvs
			b, err := s.AppendTo([]byte{0xee}) // appends, keeps the prefix
			if err != nil {
				t.Fatal(err)
			}
			if b[0] != 0xee || len(b)-1 != tt.wantLen || s.Len() != tt.wantLen {
				t.Fatalf("encoded %d bytes (Len %d), want %d", len(b)-1, s.Len(), tt.wantLen)
			}
			got, err := ParseSRH(append(b[1:], 0xff, 0xff)) // trailing bytes ignored
			if err != nil {
				t.Fatal(err)
			}
			if int(got.HdrExtLen) != tt.wantLen/8-1 || got.RoutingType != 4 || got.NextHeader != ProtoIPv4 ||
				got.SegmentsLeft != uint8(tt.n-1) || got.LastEntry != uint8(tt.n-1) || got.Flags != 0x40 || got.Tag != 0x1234 {
				t.Fatalf("fields: %+v", got)
			}
			if !slices.Equal(got.Travel(), travel) {
				t.Fatalf("segments %v, want travel %v", got.Segments, travel)
			}
			var types []uint8
			for _, tl := range got.TLVs {
				types = append(types, tl.Type)
			}
			if !slices.Equal(types, tt.wantPad) {
				t.Fatalf("tlv types %v, want %v", types, tt.wantPad)
			}
			for i, tl := range tt.tlvs {
				if tl.Type != got.TLVs[i].Type || !bytes.Equal(tl.Value, got.TLVs[i].Value) {
					t.Fatalf("tlv %d = %+v, want %+v", i, got.TLVs[i], tl)
				}
			}
			again, err := got.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			mustEq(t, "re-encoded", again, b[1:])
		})
	}
}

func TestHMACTLV(t *testing.T) {
	h := HMACTLV{DFlag: true, KeyID: 0xdeadbeef, HMAC: []byte{1, 2, 3, 4, 5, 6, 7, 8}}
	tl := h.TLV()
	mustEq(t, "hmac value", tl.Value, unhex(t, "8000 deadbeef 0102030405060708"))
	got, err := tl.HMAC()
	if err != nil || !got.DFlag || got.KeyID != h.KeyID || !bytes.Equal(got.HMAC, h.HMAC) {
		t.Fatalf("HMAC() = %+v, %v", got, err)
	}
	if _, err := (TLV{Type: TLVHMAC, Value: []byte{0, 0}}).HMAC(); !errors.Is(err, ErrBadTLV) {
		t.Fatalf("short hmac: %v", err)
	}
	if _, err := (TLV{Type: TLVPadN, Value: make([]byte, 8)}).HMAC(); !errors.Is(err, ErrBadTLV) {
		t.Fatalf("padn as hmac: %v", err)
	}
}

// validSRH is a 3-segment SRH with a 6-byte TLV: 8 + 48 + 8 bytes.
func validSRH(t testing.TB) []byte {
	t.Helper()
	s := NewSRH(ProtoIPv6, addrs(t, "fc00:1::1, fc00:2::2, fc00:3::3"))
	s.TLVs = []TLV{{Type: 0x80, Value: []byte{1, 2, 3, 4, 5, 6}}}
	b, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseSRHMalformed(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(b []byte) []byte
		want   error
		field  string
		offset int
	}{
		{"routing type 0", func(b []byte) []byte { b[2] = 0; return b }, ErrBadRoutingType, "routing type", 2},
		{"routing type 3", func(b []byte) []byte { b[2] = 3; return b }, ErrBadRoutingType, "routing type", 2},
		{"hdr ext len too short for last entry", func(b []byte) []byte { b[1] = 5; return b[:48] }, ErrBadHdrLen, "last entry", 4},
		{"last entry beyond hdr ext len", func(b []byte) []byte { b[4] = 3; b[3] = 3; return b }, ErrBadHdrLen, "last entry", 4},
		{"sl over last entry", func(b []byte) []byte { b[3] = 3; return b }, ErrSLOverLast, "segments left", 3},
		{"sl 255", func(b []byte) []byte { b[3] = 255; return b }, ErrSLOverLast, "segments left", 3},
		{"too many segments", func(b []byte) []byte {
			b[4], b[1] = MaxSegments, 2*(MaxSegments+1)
			return append(b, make([]byte, 16*(MaxSegments+1)+8-len(b))...)
		}, ErrTooManySegments, "last entry", 4},
		{"too many segments wins over bad len", func(b []byte) []byte { b[4] = 200; return b }, ErrTooManySegments, "last entry", 4},
		{"tlv length past end", func(b []byte) []byte { b[57] = 7; return b }, ErrBadTLV, "tlv", 56},
		{"tlv length byte missing", func(b []byte) []byte {
			// 7 Pad1 then a lone type byte.
			copy(b[56:], []byte{0, 0, 0, 0, 0, 0, 0, 0x80})
			return b
		}, ErrBadTLV, "tlv", 63},
		{"too many tlvs", func(b []byte) []byte {
			b[1] += 2 // 24 bytes of Pad1 in total
			return append(b[:56], make([]byte, 24)...)
		}, ErrBadTLV, "tlv count", 56 + MaxTLVs},
		{"truncated inside segments", func(b []byte) []byte { return b[:30] }, ErrTruncated, "hdr ext len", 1},
		{"truncated inside tlvs", func(b []byte) []byte { return b[:60] }, ErrTruncated, "hdr ext len", 1},
		{"truncated fixed", func(b []byte) []byte { return b[:7] }, ErrTruncated, "fixed header", 7},
		{"empty", func(b []byte) []byte { return nil }, ErrTruncated, "fixed header", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.mutate(validSRH(t))
			_, err := ParseSRH(b)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			var de *DecodeError
			if !errors.As(err, &de) || de.Layer != "srh" || de.Field != tt.field || de.Offset != tt.offset {
				t.Fatalf("err = %#v, want srh %s at %d", err, tt.field, tt.offset)
			}
		})
	}
}

func TestParseSRHAcceptsEdgeCases(t *testing.T) {
	b := validSRH(t)
	// Exactly MaxTLVs TLVs: 16 Pad1 (two 8-byte units).
	c := append(append([]byte{}, b[:56]...), make([]byte, 16)...)
	c[1] += 1
	if s, err := ParseSRH(c); err != nil || len(s.TLVs) != MaxTLVs {
		t.Fatalf("16 pad1: %v, %d tlvs", err, len(s.TLVs))
	}
	// Hdr Ext Len larger than the segments need, filled with PadN: valid.
	// SL = 0 is valid for the parser (behaviors decide what it means).
	c = append([]byte{}, b...)
	c[3] = 0
	if s, err := ParseSRH(c); err != nil || s.SegmentsLeft != 0 {
		t.Fatalf("sl 0: %v", err)
	}
	// Odd Hdr Ext Len (TLV area of 8 bytes) and one segment.
	one := NewSRH(ProtoIPv6, addrs(t, "fc00::1"))
	one.TLVs = []TLV{{Type: 0x81, Value: make([]byte, 6)}}
	ob, _ := one.Marshal()
	if ob[1] != 3 {
		t.Fatalf("hdr ext len %d, want 3", ob[1])
	}
	if _, err := ParseSRH(ob); err != nil {
		t.Fatal(err)
	}
}

// Every strict prefix of a valid SRH is truncated, never anything else.
func TestParseSRHTruncatedAtEveryByte(t *testing.T) {
	b := validSRH(t)
	for n := range len(b) {
		if _, err := ParseSRH(b[:n]); !errors.Is(err, ErrTruncated) {
			t.Fatalf("prefix of %d bytes: err = %v, want ErrTruncated", n, err)
		}
	}
}

func TestSRHAppendToErrors(t *testing.T) {
	s := NewSRH(ProtoIPv6, addrs(t, "fc00::1"))
	s.TLVs = []TLV{{Type: 0x80, Value: make([]byte, 256)}}
	if _, err := s.Marshal(); !errors.Is(err, ErrBadTLV) {
		t.Fatalf("256-byte value: %v", err)
	}
	s.TLVs = []TLV{{Type: TLVPad1, Value: []byte{1}}}
	if _, err := s.Marshal(); !errors.Is(err, ErrBadTLV) {
		t.Fatalf("pad1 with value: %v", err)
	}
	s.TLVs = nil
	s.Segments = make([]netip.Addr, 128)
	if _, err := s.Marshal(); !errors.Is(err, ErrTooLong) {
		t.Fatalf("128 segments: %v", err)
	}
	s.Segments = make([]netip.Addr, 127)
	if _, err := s.Marshal(); err != nil {
		t.Fatalf("127 segments: %v", err)
	}
	// Fields are written as stored: a deliberately bad SRH can be built.
	bad := NewSRH(ProtoIPv6, addrs(t, "fc00::1, fc00::2"))
	bad.SegmentsLeft, bad.RoutingType = 5, 2
	b, err := bad.Marshal()
	if err != nil || b[SRHOffSegmentsLeft] != 5 || b[SRHOffRoutingType] != 2 {
		t.Fatalf("bad srh: %x, %v", b, err)
	}
	if _, err := (SRH{}).Active(); !errors.Is(err, ErrSLOverLast) {
		t.Fatalf("Active on empty: %v", err)
	}
}

func TestKernelHMAC(t *testing.T) {
	s := NewSRH(ProtoIPv6, addrs(t, "fc00::1"))
	s.TLVs = []TLV{HMACTLV{KeyID: 3, HMAC: make([]byte, 32)}.TLV()}
	if _, ok := s.KernelHMAC(); ok {
		t.Fatal("no H flag")
	}
	s.Flags = SRHFlagHMAC
	if h, ok := s.KernelHMAC(); !ok || h.KeyID != 3 {
		t.Fatalf("H flag: %+v %v", h, ok)
	}
	s.TLVs = []TLV{HMACTLV{KeyID: 3, HMAC: make([]byte, 16)}.TLV()} // length 22, not 38
	if _, ok := s.KernelHMAC(); ok {
		t.Fatal("short hmac")
	}
	s.TLVs = []TLV{HMACTLV{KeyID: 3, HMAC: make([]byte, 32)}.TLV(), {Type: TLVPadN, Value: make([]byte, 6)}}
	if _, ok := s.KernelHMAC(); ok {
		t.Fatal("hmac not last")
	}
}
