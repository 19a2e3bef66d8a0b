package bench

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/srchain/srchain/internal/srv6"
)

var testEP = Endpoints{
	Src: net.HardwareAddr{0x02, 0, 0, 0, 0, 1},
	Dst: net.HardwareAddr{0x02, 0, 0, 0, 0, 2},
}

// Every registered case's frames decode with the project's codec and
// carry what the case says: SRH with the SIDs, inner family, UDP.
func TestCaseFramesDecode(t *testing.T) {
	for _, sc := range Scenarios() {
		for _, c := range sc.Cases {
			for _, size := range []int{0, 126, 474, 1518} {
				fr, err := BuildFrame(c.Frame, size, 0, testEP)
				if err != nil {
					t.Fatalf("%s/%s size %d: %v", sc.Name, c.Name, size, err)
				}
				p, err := srv6.Decode(fr, true)
				if err != nil {
					t.Fatalf("%s/%s size %d: decode: %v", sc.Name, c.Name, size, err)
				}
				if p.L4 == nil || p.L4.Proto != srv6.ProtoUDP {
					t.Errorf("%s/%s: no UDP inside", sc.Name, c.Name)
				}
				sids := append(c.Frame.Encap, c.Frame.Insert...)
				switch {
				case len(sids) == 0 && p.SRH != nil:
					t.Errorf("%s/%s: unexpected SRH", sc.Name, c.Name)
				case len(sids) > 0 && p.SRH == nil:
					t.Errorf("%s/%s: no SRH", sc.Name, c.Name)
				case len(sids) > 0:
					if p.Outer.Dst != sids[0] {
						t.Errorf("%s/%s: outer dst %v, want first SID %v", sc.Name, c.Name, p.Outer.Dst, sids[0])
					}
					if int(p.SRH.SegmentsLeft) != len(sids)-1 && len(c.Frame.Encap) > 0 {
						t.Errorf("%s/%s: SL %d for %d SIDs", sc.Name, c.Name, p.SRH.SegmentsLeft, len(sids))
					}
				}
				if (p.Inner4 != nil) != c.Frame.Inner4 {
					t.Errorf("%s/%s: inner IPv4 = %v, want %v", sc.Name, c.Name, p.Inner4 != nil, c.Frame.Inner4)
				}
				if size >= 200 && len(fr)+fcsLen != size {
					t.Errorf("%s/%s: size %d built %d bytes (+FCS)", sc.Name, c.Name, size, len(fr))
				}
				if len(p.Payload) < trailerLen {
					t.Errorf("%s/%s: payload %d bytes, no room for the latency trailer", sc.Name, c.Name, len(p.Payload))
				}
			}
		}
	}
}

func TestBuildFrameSmallest(t *testing.T) {
	fr, err := BuildFrame(FrameSpec{}, 0, 0, testEP)
	if err != nil {
		t.Fatal(err)
	}
	// Ethernet 14 + IPv6 40 + UDP 8 + 16 bytes of payload.
	if len(fr) != 14+40+8+minPayload {
		t.Errorf("smallest plain frame %d bytes", len(fr))
	}
	big, err := BuildFrame(FrameSpec{}, 64, 0, testEP)
	if err != nil || len(big) != len(fr) {
		t.Errorf("size below minimum: %d bytes, %v; want raised to %d", len(big), err, len(fr))
	}
}

func TestBuildTemplatesIMIX(t *testing.T) {
	fr, err := BuildTemplates(FrameSpec{Encap: []netip.Addr{SID(1)}}, Profile{IMIX: true}, testEP)
	if err != nil {
		t.Fatal(err)
	}
	count := map[int]int{}
	for _, f := range fr {
		count[len(f)+fcsLen]++
	}
	// seed 001 Table 2: 58.33 / 33.33 / 8.33 % = 7 : 4 : 1.
	if count[192] != 7 || count[576] != 4 || count[1500] != 1 || len(fr) != 12 {
		t.Errorf("IMIX sizes %v", count)
	}
}

func TestBuildTemplatesFlows(t *testing.T) {
	fr, err := BuildTemplates(FrameSpec{}, Profile{Flows: 4}, testEP)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[[2]netip.Addr]bool{}
	for _, f := range fr {
		p, err := srv6.Decode(f, true)
		if err != nil {
			t.Fatal(err)
		}
		if !netip.MustParsePrefix("fc00:5::/64").Contains(p.Outer.Dst) {
			t.Errorf("flow destination %v outside the routed prefix", p.Outer.Dst)
		}
		seen[[2]netip.Addr{p.Outer.Src, p.Outer.Dst}] = true
	}
	if len(seen) != 4 {
		t.Errorf("%d distinct flows, want 4", len(seen))
	}
	if _, err := BuildTemplates(FrameSpec{}, Profile{IMIX: true, Flows: 6}, testEP); !errors.Is(err, ErrFrame) {
		t.Errorf("72 templates: err %v, want ErrFrame", err)
	}
}

func TestBuildFrameErrors(t *testing.T) {
	for _, tc := range []struct {
		spec FrameSpec
		size int
	}{
		{FrameSpec{Inner4: true}, 0},
		{FrameSpec{Encap: []netip.Addr{SID(1)}, Insert: []netip.Addr{SID(2)}}, 0},
		{FrameSpec{}, MaxFrame + 100},
	} {
		if _, err := BuildFrame(tc.spec, tc.size, 0, testEP); !errors.Is(err, ErrFrame) {
			t.Errorf("BuildFrame(%+v, %d) err = %v, want ErrFrame", tc.spec, tc.size, err)
		}
	}
}

func TestSweepSizes(t *testing.T) {
	s := SweepSizes()
	if len(s) != 11 || s[0] != 126 || s[8] != 1518 || s[10] != 1866 {
		t.Errorf("sweep %v", s)
	}
}

// FrameSpec.TLVs land in the SRH after the segment list, at TLVOffset,
// for every size, and decode as the TLVs given; flows and sizes still
// work, and TLVs without an SRH are refused.
func TestFrameTLVs(t *testing.T) {
	tlv := srv6.TLV{Type: 252, Value: []byte{0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}}
	for _, segs := range [][]netip.Addr{sids(0x206), sids(0x100, 0), sids(1, 2, 3, 0)} {
		spec := FrameSpec{Encap: segs, TLVs: []srv6.TLV{tlv}}
		off, err := TLVOffset(spec)
		if err != nil {
			t.Fatal(err)
		}
		for _, size := range []int{0, 192, 1500} {
			fr, err := BuildFrame(spec, size, 0, testEP)
			if err != nil {
				t.Fatalf("%d sids size %d: %v", len(segs), size, err)
			}
			if size >= 200 && len(fr)+fcsLen != size {
				t.Errorf("%d sids: size %d built %d bytes (+FCS)", len(segs), size, len(fr))
			}
			p, err := srv6.Decode(fr, true)
			if err != nil {
				t.Fatalf("%d sids size %d: decode: %v", len(segs), size, err)
			}
			if p.SRH == nil || len(p.SRH.TLVs) != 1 || p.SRH.TLVs[0].Type != tlv.Type || !bytes.Equal(p.SRH.TLVs[0].Value, tlv.Value) {
				t.Fatalf("%d sids size %d: srh tlvs %+v", len(segs), size, p.SRH)
			}
			if fr[off] != tlv.Type || fr[off+1] != byte(len(tlv.Value)) || !bytes.Equal(fr[off+2:off+2+len(tlv.Value)], tlv.Value) {
				t.Errorf("%d sids: tlv not at offset %d", len(segs), off)
			}
			if p.L4 == nil || p.L4.Proto != srv6.ProtoUDP {
				t.Errorf("%d sids: no UDP inside", len(segs))
			}
		}
		// The flow offset still finds the inner source behind the TLV.
		foff, err := FlowOffset(spec)
		if err != nil {
			t.Fatal(err)
		}
		fr, _ := BuildFrame(spec, 0, 0, testEP)
		src := InnerSrc6.As16()
		if !bytes.Equal(fr[foff-12:foff+4], src[:]) {
			t.Errorf("%d sids: flow offset %d misses the inner source", len(segs), foff)
		}
	}
	if _, err := BuildFrame(FrameSpec{TLVs: []srv6.TLV{tlv}}, 0, 0, testEP); !errors.Is(err, ErrFrame) {
		t.Errorf("tlvs without srh: err %v, want ErrFrame", err)
	}
	if _, err := TLVOffset(FrameSpec{Encap: sids(1)}); !errors.Is(err, ErrFrame) {
		t.Errorf("tlv offset without tlvs: err %v, want ErrFrame", err)
	}
}
