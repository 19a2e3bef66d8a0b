package srv6

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"github.com/srchain/srchain/internal/testutil"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// The scapy cross-check: packets built here are dissected by scapy and
// packets built by scapy are decoded here (testdata/scapy_srv6.py). It
// skips when Debian's python3-scapy is not installed.

const python = "/usr/bin/python3"

func scapy(t *testing.T, mode string, stdin []byte) []byte {
	t.Helper()
	if _, err := os.Stat(python); err != nil {
		testutil.Unavailable(t, "no %s", python)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "testdata/scapy_srv6.py", mode)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 3 {
		testutil.Unavailable(t, "scapy with IPv6ExtHdrSegmentRouting not importable: %s", stderr.String())
	}
	if err != nil {
		t.Fatalf("scapy %s: %v: %s", mode, err, stderr.String())
	}
	return out
}

type scapyView struct {
	Src, Dst string
	Hlim     int
	NH       int
	Plen     int
	TC       int
	FL       int
	SRH      *struct {
		NH, Len, Type, Segleft, Lastentry, Flags, Tag int
		Addresses                                     []string
		TLVTypes                                      []int    `json:"tlv_types"`
		TLVValues                                     []string `json:"tlv_values"`
	}
	Inner *struct {
		Version  int
		Src, Dst string
	}
	L4 *struct {
		Proto, Sport, Dport, Flags, Type, Code, ID, Seq int
	}
	Payload    string
	ChecksumOK bool `json:"chksum_ok"`
	Len        int
}

func TestScapyDissectsOurPackets(t *testing.T) {
	t.Parallel() // overlaps the two python starts (scapy's import dominates)
	var pkts [][]byte
	var names []string
	add := func(name string, b []byte, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		names, pkts = append(names, name), append(pkts, b)
	}
	long := make([]netip.Addr, MaxSegments)
	for i := range long {
		long[i] = netip.AddrFrom16([16]byte{0xfc, 0, 0, byte(i), 15: 0xe})
	}
	tlv6 := TLV{Type: 0x7e, Value: []byte{1, 2, 3, 4, 5, 6}} // no padding needed
	tlv2 := TLV{Type: 0x7f, Value: []byte{9, 9}}             // PadN of 2
	for _, c := range innerCases() {
		b, err := Encap(tunSrc, chain, c.pkt, tlv6)
		add("encap "+c.name, b, err)
		b, err = Encap(tunSrc, long, c.pkt, tlv2)
		add("encap16 "+c.name, b, err)
		if !c.v4 {
			add("plain "+c.name, c.pkt, nil)
			b, err = Insert(c.pkt, chain[:2])
			add("insert "+c.name, b, err)
			if err == nil {
				b, err = MutateEnd(b)
				add("insert+end "+c.name, b, err)
			}
		}
	}
	s := NewSRH(ProtoUDP, chain)
	s.Flags, s.Tag, s.SegmentsLeft = 0x28, 0xbeef, 1
	srh, _ := s.Marshal()
	// Checksummed for the final destination (Segment List[0]), sent to the
	// active segment (SL 1).
	u := UDP6(hostA, chain[2], 1, 2, []byte("z"))
	b := slices.Concat(u[:40], srh, u[40:])
	b[6], b[5] = ProtoRouting, b[5]+byte(len(srh))
	copy(b[24:40], chain[1].AsSlice())
	add("flags tag", b, nil)

	var in bytes.Buffer
	for _, p := range pkts {
		in.WriteString(hex.EncodeToString(p) + "\n")
	}
	out := scapy(t, "check", in.Bytes())
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for i := 0; sc.Scan(); i++ {
		if i >= len(pkts) {
			t.Fatalf("scapy printed more lines than packets")
		}
		t.Run(names[i], func(t *testing.T) {
			var v scapyView
			if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
				t.Fatal(err)
			}
			compareWithScapy(t, pkts[i], v)
		})
		if i == len(pkts)-1 {
			return
		}
	}
	t.Fatalf("scapy answered fewer lines than %d packets", len(pkts))
}

func compareWithScapy(t *testing.T, pkt []byte, v scapyView) {
	t.Helper()
	p, err := Decode(pkt, false)
	if err != nil {
		t.Fatal(err)
	}
	o := p.Outer
	if v.Src != o.Src.String() || v.Dst != o.Dst.String() || v.Hlim != int(o.HopLimit) || v.NH != int(o.NextHeader) ||
		v.Plen != int(o.PayloadLen) || v.TC != int(o.TrafficClass) || v.FL != int(o.FlowLabel) || v.Len != len(pkt) {
		t.Fatalf("outer: scapy %+v, go %+v", v, o)
	}
	if !v.ChecksumOK {
		t.Errorf("scapy recomputes different checksums")
	}
	if (v.SRH == nil) != (p.SRH == nil) {
		t.Fatalf("srh presence: scapy %v, go %v", v.SRH != nil, p.SRH != nil)
	}
	if s := p.SRH; s != nil {
		w := v.SRH
		if w.NH != int(s.NextHeader) || w.Len != int(s.HdrExtLen) || w.Type != int(s.RoutingType) ||
			w.Segleft != int(s.SegmentsLeft) || w.Lastentry != int(s.LastEntry) || w.Flags != int(s.Flags) || w.Tag != int(s.Tag) {
			t.Fatalf("srh: scapy %+v, go %+v", *w, *s)
		}
		var segs, types, values []string
		for _, a := range s.Segments {
			segs = append(segs, a.String())
		}
		for _, tl := range s.TLVs {
			types = append(types, string(rune(tl.Type)))
			values = append(values, hex.EncodeToString(tl.Value))
		}
		var wtypes []string
		for _, ty := range w.TLVTypes {
			wtypes = append(wtypes, string(rune(ty)))
		}
		if !slices.Equal(segs, w.Addresses) || !slices.Equal(types, wtypes) || !slices.Equal(values, w.TLVValues) {
			t.Fatalf("segments/tlvs: scapy %v %v %v, go %v %v %v", w.Addresses, w.TLVTypes, w.TLVValues, segs, types, values)
		}
	}
	if v.Inner != nil {
		switch {
		case p.Inner6 != nil:
			if v.Inner.Version != 6 || v.Inner.Src != p.Inner6.Src.String() || v.Inner.Dst != p.Inner6.Dst.String() {
				t.Fatalf("inner6: scapy %+v, go %+v", *v.Inner, *p.Inner6)
			}
		case p.Inner4 != nil:
			if v.Inner.Version != 4 || v.Inner.Src != p.Inner4.Src.String() || v.Inner.Dst != p.Inner4.Dst.String() {
				t.Fatalf("inner4: scapy %+v, go %+v", *v.Inner, *p.Inner4)
			}
		default:
			t.Fatalf("scapy sees an inner packet, go does not")
		}
	}
	if (v.L4 == nil) != (p.L4 == nil) {
		t.Fatalf("l4 presence: scapy %v, go %v", v.L4, p.L4)
	}
	if l := p.L4; l != nil {
		w := v.L4
		ok := w.Proto == int(l.Proto)
		switch l.Proto {
		case ProtoUDP, ProtoTCP:
			ok = ok && w.Sport == int(l.SrcPort) && w.Dport == int(l.DstPort) && (l.Proto == ProtoUDP || w.Flags == int(l.TCPFlags))
		default:
			ok = ok && w.Type == int(l.ICMPType) && w.Code == int(l.ICMPCode) && w.ID == int(l.ICMPID) && w.Seq == int(l.ICMPSeq)
		}
		if !ok || v.Payload != hex.EncodeToString(p.Payload) {
			t.Fatalf("l4: scapy %+v %s, go %+v %x", *w, v.Payload, *l, p.Payload)
		}
	}
}

func TestScapyBuiltPacketsDecode(t *testing.T) {
	t.Parallel()
	out := scapy(t, "build", nil)
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var c struct {
			Name string
			Hex  string
			Want struct {
				Segleft, Lastentry, NH, Flags, Tag, Inner, Proto, Dport, Type, Ext int
				TLVTypes                                                           []int  `json:"tlv_types"`
				HMACKeyID                                                          uint32 `json:"hmac_keyid"`
				Addresses                                                          []string
			}
		}
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatal(err)
		}
		n++
		t.Run(c.Name, func(t *testing.T) {
			b, err := hex.DecodeString(c.Hex)
			if err != nil {
				t.Fatal(err)
			}
			p, err := Decode(b, false)
			if err != nil {
				t.Fatal(err)
			}
			s, w := p.SRH, c.Want
			if s == nil {
				t.Fatal("no srh")
			}
			var segs []string
			for _, a := range s.Segments {
				segs = append(segs, a.String())
			}
			if int(s.SegmentsLeft) != w.Segleft || int(s.LastEntry) != w.Lastentry || int(s.NextHeader) != w.NH ||
				int(s.Flags) != w.Flags || int(s.Tag) != w.Tag || !slices.Equal(segs, w.Addresses) || len(p.Ext) != w.Ext {
				t.Fatalf("srh %+v ext %d, want %+v", *s, len(p.Ext), w)
			}
			if w.TLVTypes != nil {
				var types []int
				for _, tl := range s.TLVs {
					types = append(types, int(tl.Type))
				}
				if !slices.Equal(types, w.TLVTypes) {
					t.Fatalf("tlv types %v, want %v", types, w.TLVTypes)
				}
			}
			if w.HMACKeyID != 0 {
				h, err := s.TLVs[0].HMAC()
				if err != nil || h.KeyID != w.HMACKeyID || !h.DFlag || len(h.HMAC) != 32 {
					t.Fatalf("hmac %+v, %v", h, err)
				}
			}
			if w.Inner == 6 && p.Inner6 == nil || w.Inner == 4 && p.Inner4 == nil {
				t.Fatalf("inner: %+v %+v", p.Inner4, p.Inner6)
			}
			if w.Proto != 0 && (p.L4 == nil || int(p.L4.Proto) != w.Proto || w.Dport != 0 && int(p.L4.DstPort) != w.Dport ||
				w.Type != 0 && int(p.L4.ICMPType) != w.Type) {
				t.Fatalf("l4 %+v, want %+v", p.L4, w)
			}
			// Re-encoding what Go parsed reproduces scapy's SRH bytes.
			enc, err := s.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			mustEq(t, "srh", enc, b[p.SRHOff:p.SRHOff+s.Len()])
			verifyDecodedChecksum(t, b, p)
		})
	}
	if n == 0 {
		t.Fatal("scapy built nothing")
	}
}

// verifyDecodedChecksum checks the innermost L4 checksum of a decoded
// packet. In insert mode the pseudo-header carries the final destination,
// Segment List[0] (RFC 8200 section 8.1).
func verifyDecodedChecksum(t *testing.T, b []byte, p Packet) {
	t.Helper()
	if p.L4 == nil {
		return
	}
	var src, dst netip.Addr
	switch {
	case p.Inner4 != nil:
		src, dst = p.Inner4.Src, p.Inner4.Dst
	case p.Inner6 != nil:
		src, dst = p.Inner6.Src, p.Inner6.Dst
	default:
		src, dst = p.Outer.Src, p.Outer.Dst
		if p.SRH != nil {
			dst = p.SRH.Segments[0]
		}
	}
	hl := map[uint8]int{ProtoUDP: UDPHeaderLen, ProtoTCP: TCPMinHeaderLen, ProtoICMP: ICMPHeaderLen, ProtoICMPv6: ICMPHeaderLen}[p.L4.Proto]
	start := len(b) - len(p.Payload) - hl
	seg := b[start:]
	if p.L4.Proto == ProtoICMP {
		if Checksum(seg) != 0 {
			t.Fatal("icmp checksum")
		}
		return
	}
	if L4Checksum(src, dst, p.L4.Proto, seg) != 0 {
		t.Fatalf("l4 checksum with %v -> %v", src, dst)
	}
}
