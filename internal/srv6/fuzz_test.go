package srv6

import (
	"bytes"
	"testing"
)

// seedPackets are well-formed packets of every kind the codec builds.
func seedPackets(t testing.TB) [][]byte {
	var out [][]byte
	for _, c := range innerCases() {
		out = append(out, c.pkt)
		e, err := Encap(tunSrc, chain, c.pkt, TLV{Type: 0x7e, Value: []byte{1, 2, 3}})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
		if !c.v4 {
			i, err := Insert(c.pkt, chain)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, i)
		}
	}
	h, _ := Encap(tunSrc, chain, UDP6(hostA, hostB, 1, 2, nil), HMACTLV{KeyID: 1, HMAC: make([]byte, 32)}.TLV())
	return append(out, h)
}

func FuzzParseSRH(f *testing.F) {
	for _, p := range seedPackets(f) {
		if _, off, err := FindSRH(p); err == nil {
			f.Add(p[off:])
		}
	}
	f.Add([]byte{0, 0, 4, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseSRH(b)
		if err != nil {
			return
		}
		n := (int(b[1]) + 1) * 8
		if s.Len() != n {
			t.Fatalf("Len %d, header says %d", s.Len(), n)
		}
		out, err := s.Marshal()
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if !bytes.Equal(out, b[:n]) {
			t.Fatalf("re-encoded\n %x\nfrom\n %x", out, b[:n])
		}
		if s.SegmentsLeft > s.LastEntry || len(s.Segments) > MaxSegments || len(s.TLVs) > MaxTLVs {
			t.Fatalf("invalid SRH accepted: %+v", s)
		}
		if _, err := s.Active(); err != nil {
			t.Fatalf("Active: %v", err)
		}
	})
}

func FuzzDecode(f *testing.F) {
	for _, p := range seedPackets(f) {
		f.Add(p, false)
		f.Add(Ether(macB, macA, EtherTypeIPv6, p), true)
	}
	f.Fuzz(func(t *testing.T, frame []byte, eth bool) {
		p, err := Decode(frame, eth)
		if err == nil && p.SRH != nil {
			out, err := p.SRH.Marshal()
			if err != nil {
				t.Fatalf("re-encode: %v", err)
			}
			if !bytes.Equal(out, frame[p.SRHOff:p.SRHOff+len(out)]) {
				t.Fatalf("re-encoded SRH differs:\n %x\n %x", out, frame[p.SRHOff:p.SRHOff+len(out)])
			}
		}
		if eth {
			return
		}
		// The other entry points must not panic on the same bytes either.
		if out, err := MutateEnd(frame); err == nil {
			s, _, err := FindSRH(out)
			if err != nil {
				t.Fatalf("End output does not parse: %v", err)
			}
			in, _, _ := FindSRH(frame)
			if s.SegmentsLeft != in.SegmentsLeft-1 || out[7] != frame[7]-1 {
				t.Fatalf("End: sl %d -> %d", in.SegmentsLeft, s.SegmentsLeft)
			}
		}
		if out, err := MutateEndCSID(frame, 48, 16); err == nil && len(out) != len(frame) {
			t.Fatalf("End next-csid changed the length")
		}
		_, _ = Insert(frame, chain)
		_, _ = Encap(tunSrc, chain, frame)
	})
}
