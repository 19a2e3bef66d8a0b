package netfilter

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/srchain/srchain/internal/bpfrt"
	"github.com/srchain/srchain/internal/drop"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/srv6"
	"github.com/srchain/srchain/internal/testutil"
)

// TestBPFRandom: seeded random packets to End.AN.NF's SID (and next to
// it) through srchain_anf_in against ModelIn, and each accepted one
// through srchain_anf_out against ModelOut: verdict, drop reason, the
// bytes handed to netfilter, the stash, the mark's ARG, the restored
// bytes, and whether the restore kept the slot for more fragments
// (MoreFragments). The packets are drawn from: outer hop limit 0, 1, 2,
// 64, 255 or random; valid and malformed SRHs (SL, last entry, length,
// type, TLVs incl. HMAC and a bad TLV length); Hop-by-Hop, Destination
// Options, AH and Fragment headers before or after the SRH; inner IPv4
// and IPv6 (whole, first, middle and last fragments), TCP / UDP /
// ICMPv6 behind the SRH (insert mode), nothing; truncations.
func TestBPFRandom(t *testing.T) {
	testutil.RequireRoot(t)
	ns, err := netns.Create(fmt.Sprintf("srct-anfr%d", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Delete()
	o, err := Load(0)
	testutil.RequireKernel(t, "tc programs", err)
	defer o.Close()
	if err := o.SetSID(bSID, 16); err != nil {
		t.Fatal(err)
	}
	run := func(prog *ebpf.Program, data []byte, mark uint32) (uint32, []byte, uint32, drop.Reason) {
		t.Helper()
		before, _ := bpfrt.ReadDropCounts(o.DropCounters)
		out := make([]byte, len(data)+512)
		ctxOut := testutil.SKB{}
		opts := &ebpf.RunOptions{Data: data, DataOut: out, Context: testutil.SKB{Mark: mark, IngressIfindex: 1, Ifindex: 1}, ContextOut: &ctxOut}
		var ret uint32
		if err := ns.Do(func() (err error) { ret, err = prog.Run(opts); return err }); err != nil {
			t.Fatalf("run %s on %x: %v", prog, data, err)
		}
		after, _ := bpfrt.ReadDropCounts(o.DropCounters)
		moved := drop.None
		for i := range after {
			if after[i] != before[i] {
				if moved != drop.None {
					t.Errorf("two drop counters moved: %v and %v", moved, drop.Reason(i))
				}
				moved = drop.Reason(i)
			}
		}
		return ret, opts.DataOut, ctxOut.Mark, moved
	}
	for seed := uint64(1); seed <= 3; seed++ {
		rng := rand.New(rand.NewPCG(seed, 34))
		counts := map[string]int{}
		for i := range 1500 {
			pkt := randomANF(t, rng)
			if len(pkt) < 40 {
				continue
			}
			want := ModelIn(pkt, 16)
			ours := bSID.Contains(netip.AddrFrom16([16]byte(pkt[24:40])))
			ret, out, mark, moved := run(o.SrchainAnfIn, frame(pkt), 0)
			fail := func(f string, a ...any) {
				t.Fatalf("seed %d packet %d: %s\n%x", seed, i, fmt.Sprintf(f, a...), pkt)
			}
			switch {
			case !ours:
				counts["next"]++
				if ret != tcNext || moved != drop.None {
					fail("not our SID: verdict %d, drop %v; want the next program", ret, moved)
				}
				continue
			case want.Reason != drop.None:
				counts["drop "+want.Reason.String()]++
				if ret != tcShot || moved != want.Reason {
					fail("verdict %d, drop %v; model drops %v", ret, moved, want.Reason)
				}
				continue
			case want.ToKernel:
				counts["to-kernel"]++
				if ret != tcOK || moved != drop.None || !bytes.Equal(out[14:14+len(pkt)], pkt) {
					fail("verdict %d, drop %v, changed %v; model hands it unchanged to the kernel", ret, moved, !bytes.Equal(out[14:14+len(pkt)], pkt))
				}
				continue
			}
			if ret != tcOK || moved != drop.None {
				fail("verdict %d, drop %v; model accepts", ret, moved)
			}
			if got := out[14 : 14+len(want.Inner)]; !bytes.Equal(got, want.Inner) {
				fail("inner\n got %x\nwant %x", got, want.Inner)
			}
			if mark&MarkFlag == 0 || mark&0xffff != want.Arg {
				fail("mark %#x, want flag and ARG %#x", mark, want.Arg)
			}
			slot := mark >> MarkSlotShift & (1<<MarkSlotBits - 1)
			var e anfProgAnfEntry
			if err := o.AnfStash.Lookup(slot, &e); err != nil {
				t.Fatal(err)
			}
			if e.Live != 1 || !bytes.Equal(e.Hdr[:e.Hlen], want.Stash) || (e.Insert == 1) != want.Insert {
				fail("stash live=%d insert=%d %x, want %x insert %v", e.Live, e.Insert, e.Hdr[:e.Hlen], want.Stash, want.Insert)
			}
			// The way out: the inner packet as netfilter hands it on
			// (insert mode: hop limit lowered by the forwarding). An
			// inner packet that is no IP packet of its kind (an SRH
			// whose length swallowed the inner header) never leaves
			// the kernel's receive path.
			leave := want.Inner
			if v := leave[0] >> 4; !want.Insert && (v != 4 || len(leave) < 20) && (v != 6 || len(leave) < 40) {
				counts["in only (inner not ip)"]++
				continue
			}
			et := uint16(0x86dd)
			if !want.Insert && leave[0]>>4 == 4 {
				et = 0x0800
			}
			if want.Insert {
				leave = set(leave, 7, leave[7]-1)
			}
			_, got, outMark, moved := run(o.SrchainAnfOut, srv6.Ether(bMAC, bMAC, et, leave), mark)
			restored := ModelOut(want.Stash, leave, want.Insert)
			if !bytes.Equal(got[14:14+len(restored)], restored) || outMark != 0 {
				fail("restored (mark %#x)\n got %x\nwant %x", outMark, got[14:14+len(restored)], restored)
			}
			if moved != drop.ANFNoRoute { // no route in this namespace
				fail("restore drop %v, want anf-no-route after the restore", moved)
			}
			if err := o.AnfStash.Lookup(slot, &e); err != nil {
				t.Fatal(err)
			}
			if more := MoreFragments(leave); (e.Live == 1) != more {
				fail("slot live=%d after the restore, model: more fragments %v", e.Live, more)
			}
			counts[map[bool]string{false: "restored", true: "restored insert"}[want.Insert]]++
			if MoreFragments(leave) {
				counts["restored, slot kept"]++
			}
		}
		t.Logf("seed %d: %v", seed, counts)
		for _, k := range []string{"next", "to-kernel", "restored", "restored insert", "restored, slot kept", "drop no-srh", "drop srh-sl-zero", "drop pkt-truncated", "drop unsupported"} {
			if counts[k] == 0 {
				t.Errorf("seed %d: no %q case drawn", seed, k)
			}
		}
	}
}

// randomANF draws one IPv6 packet for TestBPFRandom.
func randomANF(t *testing.T, rng *rand.Rand) []byte {
	t.Helper()
	hop := func() uint8 {
		if rng.IntN(4) == 0 {
			return uint8(rng.Uint32())
		}
		return []uint8{0, 1, 2, 64, 255}[rng.IntN(5)]
	}
	big := bytes.Repeat([]byte("frag"), 100+rng.IntN(200))
	var nh uint8
	var inner []byte
	switch rng.IntN(8) {
	case 0, 1:
		nh, inner = srv6.ProtoIPv4, srv6.UDP4(bIn4S, bIn4D, 1, 2, []byte("x"))
		if rng.IntN(2) == 0 {
			ps := frag4(srv6.UDP4(bIn4S, bIn4D, 1, 2, big), 8*(20+rng.IntN(50)))
			inner = ps[rng.IntN(len(ps))]
		}
		inner = set(inner, 8, hop())
		binary.BigEndian.PutUint16(inner[10:], 0)
		binary.BigEndian.PutUint16(inner[10:], srv6.Checksum(inner[:20]))
	case 2, 3:
		nh, inner = srv6.ProtoIPv6, srv6.TCP6(bIn6S, bIn6D, 1, 2, 0x02, nil)
		if rng.IntN(2) == 0 {
			ps := frag6(srv6.UDP6(bIn6S, bIn6D, 1, 2, big), 8*(20+rng.IntN(50)), rng.Uint32())
			inner = ps[rng.IntN(len(ps))]
		}
		inner = set(inner, 7, hop())
	case 4: // insert mode: the transport (or a Fragment header) behind the SRH
		p := srv6.UDP6(bIn6S, bFinal, 1, 2, []byte("insert"))
		if rng.IntN(2) == 0 {
			ps := frag6(srv6.UDP6(bIn6S, bFinal, 1, 2, big), 8*(20+rng.IntN(50)), rng.Uint32())
			p = ps[rng.IntN(len(ps))]
		}
		nh, inner = p[6], p[40:]
	case 5:
		p := srv6.ICMP6Echo(bIn6S, bFinal, 1, 2)
		nh, inner = p[6], p[40:]
	case 6:
		nh, inner = 59, nil // No Next Header
	default:
		nh, inner = srv6.ProtoIPv4, srv6.UDP4(bIn4S, bIn4D, 1, 2, []byte("x"))
	}
	da := netip.AddrFrom16(bSID.Addr().As16())
	if rng.IntN(8) == 0 {
		da = netip.MustParseAddr("fc00:2::f2:1") // not ours
	} else {
		a := da.As16()
		binary.BigEndian.PutUint16(a[14:], uint16(rng.Uint32()))
		da = netip.AddrFrom16(a)
	}
	segs := []netip.Addr{da}
	for k := rng.IntN(3); k >= 0; k-- {
		segs = append(segs, []netip.Addr{bEgr, bFinal, netip.MustParseAddr("fc00:9::1")}[rng.IntN(3)])
	}
	s := srv6.NewSRH(nh, segs)
	// The NF's SID is active: SL points at it (segments are stored
	// reversed: segs[0] is the last entry).
	switch rng.IntN(5) {
	case 0:
		s.TLVs = []srv6.TLV{{Type: srv6.TLVPadN, Value: make([]byte, 4)}}
	case 1:
		s.TLVs = []srv6.TLV{{Type: srv6.TLVHMAC, Value: make([]byte, 38)}}
		if rng.IntN(3) != 0 {
			s.Flags |= srv6.SRHFlagHMAC
		}
	}
	srh, err := s.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	switch rng.IntN(9) {
	case 0:
		srh[3] = uint8(rng.IntN(int(srh[4]) + 3))
	case 1:
		srh[2] = uint8(rng.IntN(6))
	case 2:
		srh[1] = uint8(rng.IntN(int(srh[1]) + 3))
	case 3:
		srh[4] = uint8(rng.IntN(20))
	case 4:
		if len(srh) > 8+16*(int(srh[4])+1) {
			srh[8+16*(int(srh[4])+1)+1] = uint8(rng.IntN(64))
		}
	}
	body := append(srh, inner...)
	first := uint8(srv6.ProtoRouting)
	if rng.IntN(6) == 0 { // an extension header in front of the SRH
		typ := []uint8{0, 60, 51, 44}[rng.IntN(4)]
		h := make([]byte, 8)
		h[0] = srv6.ProtoRouting
		switch typ {
		case 0, 60:
			h[2], h[3] = 1, 4 // PadN
		case 51:
			h = append(h, make([]byte, 16)...)
			h[1] = 4
		}
		body = append(h, body...)
		first = typ
	}
	ip := srv6.IPv6{HopLimit: hop(), NextHeader: first, Src: bSrc, Dst: da, PayloadLen: uint16(len(body))}
	p := append(ip.AppendTo(nil), body...)
	switch rng.IntN(12) {
	case 0:
		p = p[:40+rng.IntN(len(p)-39)] // truncated (payload length beyond the bytes)
	case 1:
		p = append(p, make([]byte, 1+rng.IntN(20))...) // trailing bytes (trimmed)
	}
	return p
}
