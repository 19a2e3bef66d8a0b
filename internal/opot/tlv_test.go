package opot

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"

	"github.com/srchain/srchain/internal/srv6"
)

func TestTLVLayout(t *testing.T) {
	m := Meta{Slot: 1, RND: 0x0102030405060708, CML: 0x1112131415161718}
	want := []byte{252, 22, 1, 0, 0, 0, 0, 0,
		1, 2, 3, 4, 5, 6, 7, 8,
		0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18}
	got := m.AppendTo(nil)
	if !bytes.Equal(got, want) {
		t.Fatalf("AppendTo = % x\nwant       % x", got, want)
	}
	if len(got)%8 != 0 || len(got) != TLVLen || got[OffSlot] != 1 || got[OffRND] != 1 || got[OffCML] != 0x11 {
		t.Error("layout constants disagree with AppendTo")
	}
	back, err := ParseTLV(append(got, 0xff, 0xff)) // trailing bytes: the rest of the TLV area
	if err != nil || back != m {
		t.Errorf("ParseTLV = %+v, %v", back, err)
	}
	if TLVType&0x80 == 0 || TLVType == srv6.TLVPadN || TLVType == srv6.TLVHMAC || TLVType < 252 || TLVType > 254 {
		t.Errorf("type %d: must be in the RFC 8754 changes-en-route experimentation range 252-254", TLVType)
	}
}

func TestParseTLVMalformed(t *testing.T) {
	good := Meta{Slot: 0, RND: 5, CML: 6}.AppendTo(nil)
	mut := func(i int, v byte) []byte {
		b := bytes.Clone(good)
		b[i] = v
		return b
	}
	for name, b := range map[string][]byte{
		"empty":        nil,
		"one byte":     {252},
		"padn":         mut(0, srv6.TLVPadN),
		"hmac":         mut(0, srv6.TLVHMAC),
		"short length": mut(1, 14),
		"long length":  mut(1, 30),
		"truncated":    good[:TLVLen-1],
		"slot 2":       mut(OffSlot, 2),
		"slot 255":     mut(OffSlot, 255),
		"reserved 3":   mut(3, 1),
		"reserved 7":   mut(7, 0x80),
	} {
		if m, err := ParseTLV(b); !errors.Is(err, ErrTLV) {
			t.Errorf("%s: ParseTLV = %+v, %v; want ErrTLV", name, m, err)
		}
	}
}

func TestFindTLVInPacket(t *testing.T) {
	a := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	m := Meta{Slot: 1, RND: 77, CML: 88}
	inner := srv6.UDP6(a("fc00:1::1"), a("fc00:8::2"), 1, 2, []byte("x"))
	travel := []netip.Addr{a("fd00:2::1"), a("fd00:3::1"), a("fd00:6::1")}
	pkt, err := srv6.Encap(a("fd00:1::1"), travel, inner, m.SRv6TLV())
	if err != nil {
		t.Fatal(err)
	}
	// Seed 003 V-B1: the encapsulation adds 72 + 16m bytes.
	if got := len(pkt) - len(inner); got != EncapOverhead(len(travel), TLVLen) {
		t.Errorf("encap added %d bytes, want %d", got, EncapOverhead(len(travel), TLVLen))
	}
	srh, off, err := srv6.FindSRH(pkt)
	if err != nil {
		t.Fatal(err)
	}
	got, idx, err := FindTLV(srh)
	if err != nil || got != m || idx != 0 {
		t.Fatalf("FindTLV = %+v, %d, %v", got, idx, err)
	}
	// First in the TLV area: RND and CML sit 8-aligned from the SRH.
	tlvOff := off + srv6.SRHFixedLen + 16*len(travel)
	if pkt[tlvOff] != TLVType || (tlvOff-off+OffRND)%8 != 0 {
		t.Errorf("tlv at %d, type %d", tlvOff, pkt[tlvOff])
	}
	if _, err := ParseTLV(pkt[tlvOff:]); err != nil {
		t.Errorf("ParseTLV on the packet bytes: %v", err)
	}

	if _, _, err := FindTLV(srv6.SRH{}); !errors.Is(err, ErrNoTLV) {
		t.Errorf("no tlv: %v", err)
	}
	two := srv6.SRH{TLVs: []srv6.TLV{m.SRv6TLV(), m.SRv6TLV()}}
	if _, _, err := FindTLV(two); !errors.Is(err, ErrTLV) {
		t.Errorf("two tlvs: %v", err)
	}
	bad := srv6.SRH{TLVs: []srv6.TLV{{Type: TLVType, Value: []byte{0}}}}
	if _, _, err := FindTLV(bad); !errors.Is(err, ErrTLV) {
		t.Errorf("short tlv: %v", err)
	}
}

// TestTCPMSSTable3 reproduces the MSS column of seed 003 Table III
// (MTU 1500; m = 5 plain SIDs, m = 1 container of compressed SIDs).
func TestTCPMSSTable3(t *testing.T) {
	for _, tc := range []struct{ m, opot, plain int }{{5, 1288, 1312}, {1, 1352, 1376}} {
		if got := TCPMSS(1500, tc.m, TLVLen); got != tc.opot {
			t.Errorf("OPoT MSS with %d segments = %d, want %d", tc.m, got, tc.opot)
		}
		if got := TCPMSS(1500, tc.m, 0); got != tc.plain {
			t.Errorf("SRv6 MSS with %d segments = %d, want %d", tc.m, got, tc.plain)
		}
	}
}

// FuzzParseTLV: the parser never panics, and what it accepts re-encodes
// to the same 24 bytes.
func FuzzParseTLV(f *testing.F) {
	f.Add(Meta{Slot: 1, RND: 1, CML: 2}.AppendTo(nil))
	f.Add([]byte{252, 22})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseTLV(b)
		if err != nil {
			if !errors.Is(err, ErrTLV) {
				t.Fatalf("error %v is not ErrTLV", err)
			}
			return
		}
		if !bytes.Equal(m.AppendTo(nil), b[:TLVLen]) {
			t.Fatalf("accepted % x, re-encodes to % x", b[:TLVLen], m.AppendTo(nil))
		}
		if _, _, err := FindTLV(srv6.SRH{TLVs: []srv6.TLV{{Type: b[0], Value: b[2:TLVLen]}}}); err != nil {
			t.Fatalf("FindTLV rejects what ParseTLV accepts: %v", err)
		}
	})
}

// TestReservation: a route's reserved TLV area is the unfilled OPoT TLV
// and a PadN, 32 bytes (two whole "segments" for the library that reads
// routes back), tiles as a TLV area, and is refused as a proof.
func TestReservation(t *testing.T) {
	b := Reservation()
	if len(b) != ReservedLen || len(b)%16 != 0 {
		t.Fatalf("reservation of %d bytes, want %d, a multiple of 16", len(b), ReservedLen)
	}
	// An SRH of one segment with it as its TLV area.
	srh := append([]byte{41, byte((16 + len(b)) / 8), 4, 0, 0, 0, 0, 0}, make([]byte, 16)...)
	s, err := srv6.ParseSRH(append(srh, b...))
	if err != nil || len(s.TLVs) != 2 || s.TLVs[0].Type != TLVType || s.TLVs[1].Type != srv6.TLVPadN {
		t.Fatalf("ParseSRH = %+v, %v; want the OPoT TLV and a PadN", s.TLVs, err)
	}
	if b[OffSlot] != SlotUnfilled {
		t.Errorf("slot byte %d, want %d", b[OffSlot], SlotUnfilled)
	}
	if m, err := ParseTLV(b); !errors.Is(err, ErrTLV) {
		t.Errorf("ParseTLV(reservation) = %+v, %v; want ErrTLV", m, err)
	}
	filled := Meta{Slot: 1, RND: 1, CML: 2}.AppendTo(nil)
	if !bytes.Equal(b[OffRND:TLVLen], make([]byte, TLVLen-OffRND)) || !bytes.Equal(b[:2], filled[:2]) {
		t.Errorf("reservation % x: not the TLV's type and length with zero values", b)
	}
}
