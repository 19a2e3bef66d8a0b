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

// skbCtx is the head of struct __sk_buff up to ifindex (what a test run
// may set).
type skbCtx struct {
	Len, PktType, Mark, QueueMapping, Protocol, VlanPresent, VlanTCI, VlanProto, Priority uint32
	IngressIfindex, Ifindex                                                               uint32
}

// skbOut is a whole struct __sk_buff (192 bytes on Linux 6.x): the
// kernel refuses a shorter context out (ENOSPC).
type skbOut struct {
	skbCtx
	_ [37]uint32
}

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
		{"insert mode (TCP after SRH)", outer(t, bSID12, 64, srv6.ProtoTCP, travel, 1, make([]byte, 20)), tcShot},
		{"truncated", ok4[:60], tcShot},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := ModelIn(tc.pkt, 16)
			before, _ := bpfrt.ReadDropCounts(o.DropCounters)
			out := make([]byte, len(tc.pkt)+64)
			ctxOut := skbOut{}
			opts := &ebpf.RunOptions{Data: frame(tc.pkt), DataOut: out, Context: skbCtx{IngressIfindex: 1, Ifindex: 1}, ContextOut: &ctxOut}
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
		ctxOut := skbOut{}
		opts := &ebpf.RunOptions{Data: data, DataOut: out, Context: skbCtx{Mark: mark, IngressIfindex: 1, Ifindex: 1}, ContextOut: &ctxOut}
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
			want := ModelOut(model.Stash, tc.inner)
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
