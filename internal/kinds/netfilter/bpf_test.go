package netfilter

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
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

// tc verdicts.
const (
	tcNext = 0xffffffff // TC_ACT_UNSPEC (-1): tcx runs the next program
	tcOK   = 0
	tcShot = 2
)

var (
	bSID   = netip.MustParsePrefix("fc00:2::f1:0/112")
	bSrc   = netip.MustParseAddr("fc00:a2::1")
	bEgr   = netip.MustParseAddr("fc00:3::1:0")
	bMAC   = net.HardwareAddr{2, 0, 0, 0, 0, 1}
	bIn4S  = netip.MustParseAddr("10.0.1.1")
	bIn4D  = netip.MustParseAddr("10.0.4.2")
	bIn6S  = netip.MustParseAddr("fc00:a1::1")
	bIn6D  = netip.MustParseAddr("fc00:a4::2")
	bSID12 = netip.MustParseAddr("fc00:2::f1:1234")
)

// outer builds an SR packet (IPv6 header on) to dst with hop limit hl,
// segment list travel and inner packet inner of type nh.
func outer(t *testing.T, dst netip.Addr, hl uint8, nh uint8, travel []netip.Addr, sl int, inner []byte) []byte {
	t.Helper()
	s := srv6.NewSRH(nh, travel)
	s.SegmentsLeft = uint8(sl)
	srh, err := s.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	h := srv6.IPv6{HopLimit: hl, NextHeader: srv6.ProtoRouting, Src: bSrc, Dst: dst, PayloadLen: uint16(len(srh) + len(inner))}
	return append(append(h.AppendTo(nil), srh...), inner...)
}

func set(b []byte, off int, v byte) []byte {
	b = append([]byte(nil), b...)
	b[off] = v
	return b
}

func frame(ip []byte) []byte {
	return srv6.Ether(bMAC, bMAC, 0x86dd, ip)
}

// TestBPFIn checks srchain_anf_in against ModelIn on valid and
// malformed packets: verdict, drop reason, the bytes handed to the stack,
// the mark (flag, slot, ARG) and the stashed header.
func TestBPFIn(t *testing.T) {
	testutil.RequireRoot(t)
	ns, err := netns.Create(fmt.Sprintf("srct-anfb%d", os.Getpid()))
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
	travel := []netip.Addr{bSID12, bEgr}
	in4 := srv6.UDP4(bIn4S, bIn4D, 1000, 53, []byte("hello"))
	in6 := srv6.TCP6(bIn6S, bIn6D, 1000, 80, 0x02, []byte("syn"))
	ok4 := outer(t, bSID12, 64, srv6.ProtoIPv4, travel, 1, in4)
	cases := []struct {
		name string
		pkt  []byte
		verd uint32
	}{
		{"ipv4 inner", ok4, tcOK},
		{"ipv6 inner", outer(t, bSID12, 64, srv6.ProtoIPv6, travel, 1, in6), tcOK},
		{"inner ttl 255 stays", outer(t, bSID12, 64, srv6.ProtoIPv4, travel, 1, set(in4, 8, 255)), tcOK},
		{"three segments SL 2", outer(t, netip.MustParseAddr("fc00:2::f1:7"), 64, srv6.ProtoIPv4, []netip.Addr{netip.MustParseAddr("fc00:2::f1:7"), netip.MustParseAddr("fc00:9::1"), bEgr}, 2, in4), tcOK},
		{"not our SID", outer(t, netip.MustParseAddr("fc00:2::f2:0"), 64, srv6.ProtoIPv4, travel, 1, in4), tcNext},
		{"hop limit 1", outer(t, bSID12, 1, srv6.ProtoIPv4, travel, 1, in4), tcOK},
		{"SL 0", outer(t, bSID12, 64, srv6.ProtoIPv4, travel, 0, in4), tcShot},
		{"no SRH", func() []byte {
			h := srv6.IPv6{HopLimit: 64, NextHeader: srv6.ProtoUDP, Src: bSrc, Dst: bSID12, PayloadLen: 8}
			return append(h.AppendTo(nil), make([]byte, 8)...)
		}(), tcShot},
		{"routing type 3", set(ok4, 42, 3), tcShot},
		{"SL over last entry", set(ok4, 43, 5), tcShot},
		{"bad hdr ext len", set(ok4, 41, 1), tcShot},
		{"truncated", ok4[:60], tcShot},
	}
	for _, ic := range insertCases(t) {
		cases = append(cases, struct {
			name string
			pkt  []byte
			verd uint32
		}{ic.name, ic.pkt, ic.verd})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := ModelIn(tc.pkt, 16)
			before, _ := bpfrt.ReadDropCounts(o.DropCounters)
			out := make([]byte, len(tc.pkt)+64)
			ctxOut := testutil.SKB{}
			opts := &ebpf.RunOptions{Data: frame(tc.pkt), DataOut: out, Context: testutil.SKB{IngressIfindex: 1, Ifindex: 1}, ContextOut: &ctxOut}
			var ret uint32
			err := ns.Do(func() (err error) { ret, err = o.SrchainAnfIn.Run(opts); return err })
			if err != nil {
				t.Fatal(err)
			}
			after, _ := bpfrt.ReadDropCounts(o.DropCounters)
			if ret != tc.verd {
				t.Fatalf("verdict %d, want %d", ret, tc.verd)
			}
			moved := drop.None
			for i := range after {
				if after[i] != before[i] {
					moved = drop.Reason(i)
				}
			}
			if moved != want.Reason && tc.verd != tcNext {
				t.Errorf("drop reason %s, model %s", moved, want.Reason)
			}
			if ret == tcOK && want.Reason != drop.None {
				t.Fatalf("passed, model drops %s", want.Reason)
			}
			if ret != tcOK || want.ToKernel {
				if ret == tcOK && !bytes.Equal(opts.DataOut[14:], tc.pkt) {
					t.Error("packet handed to the kernel's End was changed")
				}
				return
			}
			if got := opts.DataOut[14:]; !bytes.Equal(got, want.Inner) {
				t.Errorf("inner packet\n got %x\nwant %x", got, want.Inner)
			}
			mark := ctxOut.Mark
			if mark&MarkFlag == 0 || mark&0xffff != want.Arg {
				t.Errorf("mark %#x, want flag and ARG %#x", mark, want.Arg)
			}
			slot := mark >> MarkSlotShift & (1<<MarkSlotBits - 1)
			var e anfProgAnfEntry
			if err := o.AnfStash.Lookup(slot, &e); err != nil {
				t.Fatal(err)
			}
			if e.Live != 1 || int(e.Hlen) != len(want.Stash) || !bytes.Equal(e.Hdr[:e.Hlen], want.Stash) {
				t.Errorf("stash live=%d %x, want %x", e.Live, e.Hdr[:e.Hlen], want.Stash)
			}
			if (e.Insert == 1) != want.Insert {
				t.Errorf("stash insert=%d, model insert %v", e.Insert, want.Insert)
			}
			if want.Insert && !l4OK(t, want.Inner, 24) {
				t.Error("L4 checksum of the packet handed to netfilter is wrong (DA = segment 0)")
			}
		})
	}
}

// TestBPFOut checks srchain_anf_out's restore against ModelOut (also
// after NAT changed the inner packet's size), and its refusals: no
// srchain mark bits, a consumed slot.
func TestBPFOut(t *testing.T) {
	testutil.RequireRoot(t)
	ns, err := netns.Create(fmt.Sprintf("srct-anfo%d", os.Getpid()))
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
	travel := []netip.Addr{bSID12, bEgr}
	in4 := srv6.UDP4(bIn4S, bIn4D, 1000, 53, []byte("hello"))
	pkt := outer(t, bSID12, 64, srv6.ProtoIPv4, travel, 1, in4)
	run := func(prog *ebpf.Program, data []byte, mark uint32) (uint32, []byte, uint32, drop.Counts) {
		t.Helper()
		out := make([]byte, len(data)+512)
		ctxOut := testutil.SKB{}
		opts := &ebpf.RunOptions{Data: data, DataOut: out, Context: testutil.SKB{Mark: mark, IngressIfindex: 1, Ifindex: 1}, ContextOut: &ctxOut}
		var ret uint32
		if err := ns.Do(func() (err error) { ret, err = prog.Run(opts); return err }); err != nil {
			t.Fatal(err)
		}
		d, _ := bpfrt.ReadDropCounts(o.DropCounters)
		return ret, opts.DataOut, ctxOut.Mark, d
	}
	_, inner, mark, _ := run(o.SrchainAnfIn, frame(pkt), 0)
	model := ModelIn(pkt, 16)

	for _, tc := range []struct {
		name  string
		inner []byte
	}{
		{"unchanged", inner[14:]},
		// SNAT-like rewrite that also grows the packet (8 more bytes).
		{"resized by NAT", srv6.UDP4(netip.MustParseAddr("10.0.1.99"), bIn4D, 1000, 53, []byte("hello+8bytes"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Re-stash for each run (a restore consumes the slot).
			_, in, m, _ := run(o.SrchainAnfIn, frame(pkt), 0)
			_ = in
			ret, got, outMark, d := run(o.SrchainAnfOut, srv6.Ether(bMAC, bMAC, 0x0800, tc.inner), m)
			want := ModelOut(model.Stash, tc.inner, false)
			if !bytes.Equal(got[14:], want) {
				t.Errorf("restored\n got %x\nwant %x", got[14:], want)
			}
			if binary.BigEndian.Uint16(got[12:]) != 0x86dd {
				t.Errorf("ethertype %#x, want IPv6", binary.BigEndian.Uint16(got[12:]))
			}
			if outMark != 0 {
				t.Errorf("mark %#x after restore, want the SR packet's own (0)", outMark)
			}
			// No route in this namespace: the packet is dropped as
			// anf-no-route after the restore.
			if ret != tcShot || d[drop.ANFNoRoute] == 0 {
				t.Errorf("verdict %d, drops %v, want shot with anf-no-route", ret, d.NonZero())
			}
			// The slot is consumed: the same mark again is stale.
			before := d[drop.ANFStale]
			ret, _, _, d = run(o.SrchainAnfOut, srv6.Ether(bMAC, bMAC, 0x0800, tc.inner), m)
			if ret != tcShot || d[drop.ANFStale] != before+1 {
				t.Errorf("second restore of one slot: verdict %d, stale %d -> %d", ret, before, d[drop.ANFStale])
			}
		})
	}
	before, _ := bpfrt.ReadDropCounts(o.DropCounters)
	ret, _, _, d := run(o.SrchainAnfOut, srv6.Ether(bMAC, bMAC, 0x0800, inner[14:]), mark&0xffff)
	if ret != tcShot || d[drop.ANFNoSlot] != before[drop.ANFNoSlot]+1 {
		t.Errorf("restore without srchain's mark bits: verdict %d, no-slot drops %d -> %d", ret, before[drop.ANFNoSlot], d[drop.ANFNoSlot])
	}
}

var (
	bFinal  = netip.MustParseAddr("fc00:a4::2")
	bFinal2 = netip.MustParseAddr("fc00:a4::3") // DNAT target
	bSID2   = netip.MustParseAddr("fc00:9::1")  // a SID after the NF's
)

// insertCase is an H.Insert packet (srv6.Insert, as the kernel's seg6
// inline mode builds it: segment 0 = the original destination, DA = the
// first SID) and srchain_anf_in's verdict on it.
type insertCase struct {
	name string
	pkt  []byte
	verd uint32
}

// insertPkt is H.Insert of inner with the NF's SID bSID12 first and
// then more, SL = len(travel).
func insertPkt(t *testing.T, inner []byte, travel ...netip.Addr) []byte {
	t.Helper()
	p, err := srv6.Insert(inner, travel)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func insertCases(t *testing.T) []insertCase {
	udp := srv6.UDP6(bIn6S, bFinal, 1000, 53, []byte("insert"))
	tcp := srv6.TCP6(bIn6S, bFinal, 1000, 80, 0x02, []byte("syn"))
	icmp := srv6.ICMP6Echo(bIn6S, bFinal, 7, 1)
	one := insertPkt(t, udp, bSID12)
	tlv := func() []byte {
		p, err := srv6.Insert(udp, []netip.Addr{bSID12}, srv6.TLV{Type: srv6.TLVPadN, Value: make([]byte, 6)})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}()
	return []insertCase{
		{"insert udp, SID then final", one, tcOK},
		{"insert tcp, three segments", insertPkt(t, tcp, bSID12, bSID2), tcOK},
		{"insert icmpv6, four segments", insertPkt(t, icmp, bSID12, bSID2, bEgr), tcOK},
		{"insert SID second (SL 1 of 2)", func() []byte {
			p := insertPkt(t, udp, bSID2, bSID12)
			copy(p[24:40], bSID12.AsSlice()) // the NF's SID active
			p[43] = 1
			return p
		}(), tcOK},
		{"insert with PadN TLV", tlv, tcOK},
		{"insert hop limit 255", insertPkt(t, set(udp, 7, 255), bSID12), tcOK},
		{"insert hop limit 1", insertPkt(t, set(udp, 7, 1), bSID12), tcOK},
		{"insert SL 0", set(one, 43, 0), tcShot},
		{"insert routing type 3", set(one, 42, 3), tcShot},
		{"insert SL over last entry", set(one, 43, 5), tcShot},
		{"insert bad hdr ext len", set(one, 41, 3), tcShot},
		{"insert truncated SRH", one[:60], tcShot},
	}
}

// l4OK checks the UDP / TCP / ICMPv6 checksum of an IPv6 packet (no
// extension headers other than an SRH at 40) with the pseudo-header
// destination read at daOff: 24 for the IPv6 DA, 48 for an SRH's
// segment 0.
func l4OK(t *testing.T, pkt []byte, daOff int) bool {
	t.Helper()
	off, nh := 40, pkt[6]
	if nh == srv6.ProtoRouting {
		off, nh = 40+(int(pkt[41])+1)*8, pkt[40]
	}
	src, _ := netip.AddrFromSlice(pkt[8:24])
	dst, _ := netip.AddrFromSlice(pkt[daOff : daOff+16])
	return srv6.L4Checksum(src, dst, nh, pkt[off:]) == 0
}

// TestBPFInsert runs insert-mode packets through srchain_anf_in, then
// what netfilter would hand on (the forwarding's hop limit decrement,
// DNAT of the final destination, SNAT that also resizes) through
// srchain_anf_out, and checks both halves byte for byte against ModelIn /
// ModelOutInsert, the L4 checksum in both states (DA = segment 0 for
// netfilter; DA = next SID, segment 0 = the final destination after),
// and a packet whose family netfilter cannot have changed (IPv4 to an
// insert slot: unsupported).
func TestBPFInsert(t *testing.T) {
	testutil.RequireRoot(t)
	ns, err := netns.Create(fmt.Sprintf("srct-anfi%d", os.Getpid()))
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
	run := func(prog *ebpf.Program, data []byte, mark uint32) (uint32, []byte, uint32, drop.Counts) {
		t.Helper()
		out := make([]byte, len(data)+512)
		ctxOut := testutil.SKB{}
		opts := &ebpf.RunOptions{Data: data, DataOut: out, Context: testutil.SKB{Mark: mark, IngressIfindex: 1, Ifindex: 1}, ContextOut: &ctxOut}
		var ret uint32
		if err := ns.Do(func() (err error) { ret, err = prog.Run(opts); return err }); err != nil {
			t.Fatal(err)
		}
		d, _ := bpfrt.ReadDropCounts(o.DropCounters)
		return ret, opts.DataOut, ctxOut.Mark, d
	}
	// forwarded is what the kernel's forwarding makes of the packet
	// netfilter saw: hop limit - 1.
	forwarded := func(p []byte) []byte { return set(p, 7, p[7]-1) }
	// dnat rewrites the destination and fixes the L4 checksum, as
	// netfilter's DNAT does.
	dnat := func(p []byte, to netip.Addr) []byte {
		q := append([]byte(nil), p...)
		copy(q[24:40], to.AsSlice())
		csum := 16 // TCP
		switch q[6] {
		case srv6.ProtoUDP:
			csum = 6
		case srv6.ProtoICMPv6:
			csum = 2
		}
		binary.BigEndian.PutUint16(q[40+csum:], 0)
		src, _ := netip.AddrFromSlice(q[8:24])
		binary.BigEndian.PutUint16(q[40+csum:], srv6.L4Checksum(src, to, q[6], q[40:]))
		return q
	}
	for _, ic := range insertCases(t) {
		if ic.verd != tcOK {
			continue
		}
		model := ModelIn(ic.pkt, 16)
		if model.ToKernel {
			continue
		}
		t.Run(ic.name, func(t *testing.T) {
			if !model.Insert {
				t.Fatal("model does not see insert mode")
			}
			for _, nat := range []struct {
				name string
				f    func([]byte) []byte
			}{
				{"unchanged", func(p []byte) []byte { return p }},
				{"dnat", func(p []byte) []byte { return dnat(p, bFinal2) }},
				{"snat resized", func(p []byte) []byte {
					if p[6] != srv6.ProtoUDP {
						return dnat(p, bFinal2)
					}
					h := srv6.UDP6(netip.MustParseAddr("fc00:a1::99"), bFinal, 1000, 53, []byte("insert and 8 more"))
					h[7] = p[7]
					return h
				}},
			} {
				t.Run(nat.name, func(t *testing.T) {
					ret, in, m, _ := run(o.SrchainAnfIn, frame(ic.pkt), 0)
					if ret != tcOK || !bytes.Equal(in[14:], model.Inner) {
						t.Fatalf("anf_in: verdict %d\n got %x\nwant %x", ret, in[14:], model.Inner)
					}
					leave := nat.f(forwarded(model.Inner))
					ret, got, outMark, d := run(o.SrchainAnfOut, frame(leave), m)
					want := ModelOut(model.Stash, leave, true)
					if !bytes.Equal(got[14:], want) {
						t.Errorf("restored\n got %x\nwant %x", got[14:], want)
					}
					if outMark != 0 {
						t.Errorf("mark %#x after restore, want 0", outMark)
					}
					if ret != tcShot || d[drop.ANFNoRoute] == 0 {
						t.Errorf("verdict %d, drops %v, want shot with anf-no-route (no route here)", ret, d.NonZero())
					}
					r := got[14:]
					if !l4OK(t, r, 48) {
						t.Error("L4 checksum over segment 0 wrong after the restore")
					}
					// Independent of the model: segment 0 is where
					// the packet was going when it left netfilter,
					// hop limit lowered once, SL - 1, DA the next SID
					// or segment 0.
					if !bytes.Equal(r[48:64], leave[24:40]) || r[7] != ic.pkt[7]-1 || r[43] != ic.pkt[43]-1 {
						t.Errorf("segment 0 %x (want %x), hop limit %d (want %d), SL %d", r[48:64], leave[24:40], r[7], ic.pkt[7]-1, r[43])
					}
					next := r[48+16*int(r[43]) : 64+16*int(r[43])]
					if !bytes.Equal(r[24:40], next) {
						t.Errorf("DA %x, want segment[SL] %x", r[24:40], next)
					}
				})
			}
		})
	}
	t.Run("ipv4 into an insert slot", func(t *testing.T) {
		pkt := insertCases(t)[0].pkt
		_, _, m, before := run(o.SrchainAnfIn, frame(pkt), 0)
		ret, _, _, d := run(o.SrchainAnfOut, srv6.Ether(bMAC, bMAC, 0x0800, srv6.UDP4(bIn4S, bIn4D, 1, 2, nil)), m)
		if ret != tcShot || d[drop.Unsupported] != before[drop.Unsupported]+1 {
			t.Errorf("verdict %d, unsupported %d -> %d", ret, before[drop.Unsupported], d[drop.Unsupported])
		}
	})
}
