package opotdp

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"runtime"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/srchain/srchain/internal/drop"
	"github.com/srchain/srchain/internal/opot"
	"github.com/srchain/srchain/internal/srv6"
	"github.com/srchain/srchain/internal/testutil"
)

const (
	tcActNext = 0xffffffff // TC_ACT_UNSPEC: the next tcx program, or the stack
	tcActShot = 2
	xdpDrop   = 1
	xdpPass   = 2
	ethLen    = 14
)

var (
	outerSrc = netip.MustParseAddr("fc00:e::1")
	macA     = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xaa}
	macB     = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xbb}
)

// node is one router of a test chain: its own copy of the programs and
// maps, as on a real node.
type node struct {
	objs Objects
	n    opot.NodeParams
}

func newNode(t *testing.T, id uint32, slot uint8, n opot.NodeParams, sid, last netip.Addr) *node {
	t.Helper()
	spec, err := LoadSpec()
	if err != nil {
		t.Fatal(err)
	}
	nd := &node{n: n}
	if err := spec.LoadAndAssign(&nd.objs, nil); err != nil {
		t.Fatalf("load opot programs: %v", err)
	}
	t.Cleanup(func() { nd.objs.Close() })
	if err := PutChain(&nd.objs, id, slot, n, sid, last); err != nil {
		t.Fatal(err)
	}
	return nd
}

// chainNodes builds the k nodes of profile p's chain (id, slot) over
// travel = one SID per transit, then the egress SID: the headend sees
// the first SID as DA after its encap, transit j serves travel[j-1],
// the verifier the last.
func chainNodes(t *testing.T, p *opot.Profile, k int, id uint32, slot uint8) ([]*node, []netip.Addr) {
	t.Helper()
	var travel []netip.Addr
	for j := 1; j < k; j++ {
		travel = append(travel, netip.MustParseAddr(fmt.Sprintf("fd00:%x::e", j)))
	}
	last := travel[len(travel)-1]
	nodes := make([]*node, k)
	for j := range k {
		n, err := p.Node(j)
		if err != nil {
			t.Fatal(err)
		}
		sid := last
		switch {
		case j == 0:
			sid = travel[0]
		case j < k-1:
			sid = travel[j-1]
		}
		nodes[j] = newNode(t, id, slot, n, sid, last)
	}
	return nodes, travel
}

func run(t *testing.T, prog *ebpf.Program, frame []byte) (uint32, []byte) {
	t.Helper()
	opts := &ebpf.RunOptions{Data: frame, DataOut: make([]byte, len(frame)+256)}
	ret, err := prog.Run(opts)
	if err != nil {
		t.Fatalf("test run: %v", err)
	}
	return ret, opts.DataOut
}

// frame is an encapsulated UDP packet over travel with the given TLVs,
// its DA moved to travel[at] and SL set as an End would have.
func frame(t *testing.T, travel []netip.Addr, at int, tlvs ...srv6.TLV) []byte {
	t.Helper()
	inner := srv6.UDP6(netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2"), 1000, 2000, []byte("opot"))
	l3, err := srv6.Encap(outerSrc, travel, inner, tlvs...)
	if err != nil {
		t.Fatal(err)
	}
	f := srv6.Ether(macA, macB, srv6.EtherTypeIPv6, l3)
	da := travel[at].As16()
	copy(f[ethLen+24:], da[:])
	f[ethLen+40+3] = byte(len(travel) - 1 - at)
	return f
}

// reservation is opot.Reservation as TLVs: the unfilled OPoT TLV and
// the PadN a kernel encap route of an OPoT chain carries.
func reservation() []srv6.TLV {
	b := opot.Reservation()
	return []srv6.TLV{{Type: b[0], Value: b[2:opot.TLVLen]}, padN()}
}

// padN is the reservation's PadN.
func padN() srv6.TLV {
	b := opot.Reservation()[opot.TLVLen:]
	return srv6.TLV{Type: b[0], Value: b[2:]}
}

// tlvsOf is what a headend of a chain of k nodes sends: for odd k the
// kernel's encap with the route's PadN after the TLV, for even k the TLV
// alone (srchain's eBPF ingress).
func tlvsOf(k int, m opot.Meta) []srv6.TLV {
	if k%2 == 1 {
		return []srv6.TLV{m.SRv6TLV(), padN()}
	}
	return []srv6.TLV{m.SRv6TLV()}
}

// withSlot sets the slot byte of the OPoT TLV of tlvs.
func withSlot(tlvs []srv6.TLV, slot byte) []srv6.TLV {
	tlvs[0].Value[opot.OffSlot-2] = slot
	return tlvs
}

// tlvOff is the TLV's offset in a frame over n segments.
func tlvOff(n int) int { return ethLen + 40 + 8 + 16*n }

// stats reads the per-chain verdict counters of a node, summed over CPUs.
func stats(t *testing.T, m *ebpf.Map, id uint32, r drop.Reason) uint64 {
	t.Helper()
	var per []uint64
	if err := m.Lookup(StatIndex(id, r), &per); err != nil {
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return 0
		}
		t.Fatal(err)
	}
	var s uint64
	for _, v := range per {
		s += v
	}
	return s
}

// TestChainTestRun runs a chain of k = 3..8 nodes through the three
// programs, each node with its own maps: the headend grows the
// kernel-built SRH by the TLV (the whole frame must equal the Go-built
// encapsulation with the model's TLV), each transit updates it as
// opot.Transit does (only while the DA is its SID), and the verifier
// accepts it once and counts it; the same packet again is a replay,
// dropped, counted and reported on the ring; a packet whose transits ran
// in another order is dropped as opot-verify, and so are a skipped node,
// an RND or CML bit flip and a forged TLV (each with its event), a
// packet without TLV as opot-no-tlv, while a legitimate packet still
// verifies; a packet of no OPoT chain passes every stage untouched.
func TestChainTestRun(t *testing.T) {
	testutil.RequireRoot(t)
	rng := rand.New(rand.NewPCG(5, 6))
	for k := 3; k <= 8; k++ {
		t.Run(fmt.Sprint("k", k), func(t *testing.T) {
			var seed [32]byte
			for i := range seed {
				seed[i] = byte(rng.Uint32())
			}
			p, err := opot.GenerateFrom(rand.NewChaCha8(seed), k)
			if err != nil {
				t.Fatal(err)
			}
			f := p.Field()
			slot := uint8(k % 2)
			id := uint32(100 + k)
			nodes, travel := chainNodes(t, p, k, id, slot)

			// Headend: the kernel's encap with the route's reservation
			// in, the TLV filled in place.
			ret, out := run(t, nodes[0].objs.SrchainOpotHeadend, frame(t, travel, 0, reservation()...))
			if ret != tcActNext {
				t.Fatalf("headend: verdict %d", ret)
			}
			m, err := opot.ParseTLV(out[tlvOff(len(travel)):])
			if err != nil {
				t.Fatalf("headend output: %v", err)
			}
			r := m.RND ^ nodes[0].n.Enc.R
			if opot.SeqOf(r) != 1 || m.Slot != slot {
				t.Fatalf("headend: seq %d slot %d, want 1 and %d", opot.SeqOf(r), m.Slot, slot)
			}
			want, err := opot.Init(f, nodes[0].n, slot, r)
			if err != nil || want != m {
				t.Fatalf("headend TLV %+v, model %+v (%v)", m, want, err)
			}
			if exp := frame(t, travel, 0, m.SRv6TLV(), padN()); !bytes.Equal(out[:len(exp)], exp) {
				t.Fatalf("headend frame differs from the Go encapsulation with the TLV:\n got %x\nwant %x", out, exp)
			}
			// An SRH with a filled TLV (srchain's eBPF ingress wrote it
			// as it encapsulated) passes untouched.
			for _, in := range [][]byte{out, frame(t, travel, 0, m.SRv6TLV())} {
				if ret, o := run(t, nodes[0].objs.SrchainOpotHeadend, in); ret != tcActNext || !bytes.Equal(o[:len(in)], in) {
					t.Fatalf("headend on a frame with its TLV: verdict %d, changed %v", ret, !bytes.Equal(o[:len(in)], in))
				}
			}
			// Without a reservation or a TLV, the chain's packet has no
			// proof to carry: dropped and counted at the headend.
			for name, in := range map[string][]byte{
				"no tlv":       frame(t, travel, 0),
				"padn only":    frame(t, travel, 0, padN(), padN()),
				"reserved 24":  frame(t, travel, 0, reservation()[0]),
				"other slot 7": frame(t, travel, 0, withSlot(reservation(), 7)...),
			} {
				before := stats(t, nodes[0].objs.OpotStats, id, drop.OPoTNoTLV)
				if ret, _ := run(t, nodes[0].objs.SrchainOpotHeadend, in); ret != tcActShot {
					t.Fatalf("headend, %s: verdict %d, want drop", name, ret)
				}
				if got := stats(t, nodes[0].objs.OpotStats, id, drop.OPoTNoTLV); got != before+1 {
					t.Fatalf("headend, %s: opot-no-tlv %d, want %d", name, got, before+1)
				}
			}

			// A GSO packet leaves as many packets copying one header:
			// one proof would be replayed by every segment after the
			// first, so the headend drops it, counted.
			gso := frame(t, travel, 0, reservation()...)
			gsoBefore := stats(t, nodes[0].objs.OpotStats, id, drop.OPoTGSO)
			gopts := &ebpf.RunOptions{Data: gso, DataOut: make([]byte, len(gso)+256), Context: testutil.SKB{GSOSegs: 2, GSOSize: 20}}
			if ret, err := nodes[0].objs.SrchainOpotHeadend.Run(gopts); err != nil || ret != tcActShot {
				t.Fatalf("headend, gso packet: verdict %d (%v), want drop", ret, err)
			}
			if got := stats(t, nodes[0].objs.OpotStats, id, drop.OPoTGSO); got != gsoBefore+1 {
				t.Fatalf("headend, gso packet: opot-gso %d, want %d", got, gsoBefore+1)
			}
			// One segment is a packet like any other.
			gopts = &ebpf.RunOptions{Data: gso, DataOut: make([]byte, len(gso)+256), Context: testutil.SKB{GSOSegs: 1, GSOSize: 20}}
			if ret, err := nodes[0].objs.SrchainOpotHeadend.Run(gopts); err != nil || ret != tcActNext {
				t.Fatalf("headend, gso packet of one segment: verdict %d (%v), want it proven", ret, err)
			}

			// Transits, in order; a node does nothing for another's DA.
			pkt := out
			for j := 1; j < k-1; j++ {
				if ret, o := run(t, nodes[j].objs.SrchainOpotTransit, frame(t, travel, j, m.SRv6TLV())); ret != tcActNext || !bytes.Equal(o, frame(t, travel, j, m.SRv6TLV())) {
					t.Fatalf("transit %d touched a packet for the next SID", j)
				}
				in := frame(t, travel, j-1, m.SRv6TLV())
				ret, o := run(t, nodes[j].objs.SrchainOpotTransit, in)
				if ret != tcActNext {
					t.Fatalf("transit %d: verdict %d", j, ret)
				}
				want, err := opot.Transit(f, nodes[j].n, m)
				if err != nil {
					t.Fatal(err)
				}
				if exp := frame(t, travel, j-1, want.SRv6TLV()); !bytes.Equal(o, exp) {
					t.Fatalf("transit %d differs from the model", j)
				}
				// Behind the kernel's encap the route's PadN follows the
				// TLV: the same update.
				inP := frame(t, travel, j-1, m.SRv6TLV(), padN())
				if ret, o := run(t, nodes[j].objs.SrchainOpotTransit, inP); ret != tcActNext || !bytes.Equal(o, frame(t, travel, j-1, want.SRv6TLV(), padN())) {
					t.Fatalf("transit %d, TLV and PadN: verdict %d, differs from the model", j, ret)
				}
				m = want
				pkt = frame(t, travel, j, tlvsOf(k, m)...) // the End's work
			}

			// Verifier: accepted once, untouched, counted.
			v := nodes[k-1]
			ret, o := run(t, v.objs.SrchainOpotVerify, pkt)
			if ret != tcActNext || !bytes.Equal(o, pkt) {
				t.Fatalf("verify: verdict %d, frame changed %v", ret, !bytes.Equal(o, pkt))
			}
			if n := stats(t, v.objs.OpotStats, id, drop.None); n != 1 {
				t.Fatalf("accepted count %d", n)
			}
			rd, err := ringbuf.NewReader(v.objs.OpotEvents)
			if err != nil {
				t.Fatal(err)
			}
			defer rd.Close()
			if ret, _ := run(t, v.objs.SrchainOpotVerify, pkt); ret != tcActShot {
				t.Fatalf("replay: verdict %d", ret)
			}
			if n := stats(t, v.objs.OpotStats, id, drop.OPoTReplay); n != 1 {
				t.Fatalf("replay count %d", n)
			}
			rec, err := rd.Read() // one event is waiting: no blocking
			if err != nil {
				t.Fatal(err)
			}
			ev, err := ParseEvent(rec.RawSample)
			if err != nil || ev.Profile != id || ev.Slot != slot || ev.Reason != drop.OPoTReplay || ev.Seq != 1 {
				t.Fatalf("event %+v (%v)", ev, err)
			}

			// Transits swapped (k >= 4 has two): opot-verify.
			if k >= 4 {
				mm, _ := opot.Init(f, nodes[0].n, slot, (2<<opot.RandBits)|5)
				mm, _ = opot.Transit(f, nodes[2].n, mm)
				mm, _ = opot.Transit(f, nodes[1].n, mm)
				for j := 3; j < k-1; j++ {
					mm, _ = opot.Transit(f, nodes[j].n, mm)
				}
				if ret, _ := run(t, v.objs.SrchainOpotVerify, frame(t, travel, k-2, mm.SRv6TLV())); ret != tcActShot {
					t.Fatalf("swapped: verdict %d", ret)
				}
				if n := stats(t, v.objs.OpotStats, id, drop.OPoTVerify); n != 1 {
					t.Fatalf("verify count %d", n)
				}
			}

			// Skipped node, RND or CML bit flip, forged TLV: opot-verify;
			// no TLV at all: opot-no-tlv. Each counted and reported.
			var legit opot.Meta
			{
				mm, _ := opot.Init(f, nodes[0].n, slot, (3<<opot.RandBits)|9)
				for j := 1; j < k-1; j++ {
					mm, _ = opot.Transit(f, nodes[j].n, mm)
				}
				legit = mm
			}
			skip, _ := opot.Init(f, nodes[0].n, slot, (4<<opot.RandBits)|9)
			for j := 2; j < k-1; j++ {
				skip, _ = opot.Transit(f, nodes[j].n, skip)
			}
			rnd, cml := legit, legit
			rnd.RND ^= 1 << 20
			cml.CML ^= 1
			forged := opot.Meta{Slot: slot, RND: rng.Uint64(), CML: rng.Uint64()}
			before := stats(t, v.objs.OpotStats, id, drop.OPoTVerify)
			for name, m := range map[string]opot.Meta{"skip": skip, "rnd flip": rnd, "cml flip": cml, "forged": forged} {
				if ret, _ := run(t, v.objs.SrchainOpotVerify, frame(t, travel, k-2, m.SRv6TLV())); ret != tcActShot {
					t.Fatalf("%s: verdict %d", name, ret)
				}
				rec, err := rd.Read()
				if err != nil {
					t.Fatal(err)
				}
				if ev, err := ParseEvent(rec.RawSample); err != nil || ev.Reason != drop.OPoTVerify || ev.Profile != id {
					t.Fatalf("%s: event %+v (%v)", name, ev, err)
				}
			}
			if n := stats(t, v.objs.OpotStats, id, drop.OPoTVerify) - before; n != 4 {
				t.Fatalf("skip/flips/forged: %d counted as opot-verify, want 4", n)
			}
			if ret, _ := run(t, v.objs.SrchainOpotVerify, frame(t, travel, k-2)); ret != tcActShot {
				t.Fatalf("no TLV: verdict %d", ret)
			}
			if n := stats(t, v.objs.OpotStats, id, drop.OPoTNoTLV); n != 1 {
				t.Fatalf("no TLV count %d", n)
			}
			// The legitimate packet still verifies after all that.
			if ret, _ := run(t, v.objs.SrchainOpotVerify, frame(t, travel, k-2, legit.SRv6TLV())); ret != tcActNext {
				t.Fatalf("legitimate after attacks: verdict %d", ret)
			}

			// Another chain's packet (other last SID) passes untouched.
			other := append(append([]netip.Addr(nil), travel[:len(travel)-1]...), netip.MustParseAddr("fd00:ff::e"))
			for j, nd := range nodes {
				for _, prog := range []*ebpf.Program{nd.objs.SrchainOpotHeadend, nd.objs.SrchainOpotTransit, nd.objs.SrchainOpotVerify} {
					in := frame(t, other, min(j, len(other)-1))
					if ret, o := run(t, prog, in); ret != tcActNext || !bytes.Equal(o, in) {
						t.Fatalf("node %d: a packet of no OPoT chain was changed or dropped", j)
					}
				}
			}
		})
	}
}

// verifierBudget: instructions the verifier may process per program
// (Linux 6.18), global functions included; measured 1,607 / 4,042 /
// 4,801 when set, about 2x headroom; the XDP stage (transit and verify)
// 6,426. With the egress that owns its SID prefix (2026-11-28: the LPM
// lookup, the shape check, one SRH parse shared by both roles at XDP)
// 8,626 / 4,879 / 8,464 and 11,114 at XDP (7,196 and 7,989 before).
var verifierBudget = map[string]int{
	"srchain_opot_headend": 10_000,
	"srchain_opot_transit": 8_000,
	"srchain_opot_verify":  10_000,
	"srchain_opot_xdp":     13_000,
}

func TestVerifierStats(t *testing.T) {
	spec, err := LoadSpec()
	if err != nil {
		t.Fatal(err)
	}
	testutil.VerifierBudgets(t, spec, verifierBudget)
}

// TestXDPStage: the XDP pipeline stage does what the tc stages do, byte
// for byte, for the entries of its roles: a transit's output is the tc
// transit's (the Go model's hop), the verifier accepts a legitimate
// packet untouched and drops a replay (the window is the tc verifier's:
// the tc stage then calls the same packet a replay too) and a forged
// proof, counted and reported, and a packet without a well-formed TLV
// as opot-no-tlv, which a transit leaves alone; the headend's entry
// (its stage is at tc egress), an SRH cut short and a packet of no
// chain go on untouched. Without the
// dispatcher's metadata a stage that hands a packet on returns XDP_PASS.
func TestXDPStage(t *testing.T) {
	testutil.RequireRoot(t)
	for k := 3; k <= 5; k++ {
		t.Run(fmt.Sprint("k", k), func(t *testing.T) {
			p, err := opot.GenerateFrom(rand.NewChaCha8([32]byte{byte(k)}), k)
			if err != nil {
				t.Fatal(err)
			}
			f := p.Field()
			const id, slot = 9, 1
			nodes, travel := chainNodes(t, p, k, id, slot)
			n0 := nodes[0].n
			m, err := opot.Init(f, n0, slot, (1<<opot.RandBits)|3)
			if err != nil {
				t.Fatal(err)
			}
			// The headend's own entry: XDP leaves it to the tc stage.
			in := frame(t, travel, 0)
			if ret, o := run(t, nodes[0].objs.SrchainOpotXdp, in); ret != xdpPass || !bytes.Equal(o[:len(in)], in) {
				t.Fatalf("headend entry at XDP: verdict %d, changed %v", ret, !bytes.Equal(o[:len(in)], in))
			}
			for j := 1; j < k-1; j++ {
				in := frame(t, travel, j-1, m.SRv6TLV())
				_, tc := run(t, nodes[j].objs.SrchainOpotTransit, in)
				ret, x := run(t, nodes[j].objs.SrchainOpotXdp, in)
				if ret != xdpPass || !bytes.Equal(x[:len(in)], tc[:len(in)]) {
					t.Fatalf("transit %d at XDP: verdict %d, output differs from tc's", j, ret)
				}
				if m, err = opot.Transit(f, nodes[j].n, m); err != nil {
					t.Fatal(err)
				}
				if exp := frame(t, travel, j-1, m.SRv6TLV()); !bytes.Equal(x[:len(exp)], exp) {
					t.Fatalf("transit %d at XDP differs from the model", j)
				}
			}
			v := nodes[k-1]
			pkt := frame(t, travel, k-2, m.SRv6TLV())
			if ret, o := run(t, v.objs.SrchainOpotXdp, pkt); ret != xdpPass || !bytes.Equal(o[:len(pkt)], pkt) {
				t.Fatalf("verify at XDP: verdict %d", ret)
			}
			if n := stats(t, v.objs.OpotStats, id, drop.None); n != 1 {
				t.Fatalf("accepted count %d", n)
			}
			if ret, _ := run(t, v.objs.SrchainOpotXdp, pkt); ret != xdpDrop {
				t.Fatalf("replay at XDP: verdict %d", ret)
			}
			if ret, _ := run(t, v.objs.SrchainOpotVerify, pkt); ret != tcActShot {
				t.Fatalf("replay at tc after XDP accepted it: verdict %d", ret)
			}
			if n := stats(t, v.objs.OpotStats, id, drop.OPoTReplay); n != 2 {
				t.Fatalf("replay count %d, want 2", n)
			}
			forged := opot.Meta{Slot: slot, RND: 0x0123456789abcdef, CML: 0x0fedcba987654321}
			if ret, _ := run(t, v.objs.SrchainOpotXdp, frame(t, travel, k-2, forged.SRv6TLV())); ret != xdpDrop {
				t.Fatalf("forged at XDP: verdict %d", ret)
			}
			if n := stats(t, v.objs.OpotStats, id, drop.OPoTVerify); n != 1 {
				t.Fatalf("opot-verify count %d", n)
			}
			rd, err := ringbuf.NewReader(v.objs.OpotEvents)
			if err != nil {
				t.Fatal(err)
			}
			defer rd.Close()
			for _, want := range []drop.Reason{drop.OPoTReplay, drop.OPoTReplay, drop.OPoTVerify} {
				rec, err := rd.Read()
				if err != nil {
					t.Fatal(err)
				}
				if ev, err := ParseEvent(rec.RawSample); err != nil || ev.Reason != want || ev.Profile != id {
					t.Fatalf("event %+v (%v), want %s", ev, err, want)
				}
			}
			// Malformed: no TLV, a TLV with slot 7, an SRH cut short. A
			// transit leaves them alone (the verifier decides); the
			// verifier drops the first two as opot-no-tlv; a packet
			// whose SRH does not parse is no stage's.
			bad := opot.Meta{Slot: slot, RND: 1, CML: 2}.SRv6TLV()
			bad.Value[0] = 7
			short := frame(t, travel, k-2, m.SRv6TLV())
			short = short[:ethLen+40+8+8]
			for j := 1; j < k-1; j++ {
				for name, in := range map[string][]byte{"no tlv": frame(t, travel, j-1), "slot 7": frame(t, travel, j-1, bad), "short": short} {
					if ret, o := run(t, nodes[j].objs.SrchainOpotXdp, in); ret != xdpPass || !bytes.Equal(o[:len(in)], in) {
						t.Fatalf("transit %d at XDP, %s: verdict %d, changed %v", j, name, ret, !bytes.Equal(o[:len(in)], in))
					}
				}
			}
			for _, in := range [][]byte{frame(t, travel, k-2), frame(t, travel, k-2, bad)} {
				if ret, _ := run(t, v.objs.SrchainOpotXdp, in); ret != xdpDrop {
					t.Fatalf("verify at XDP without a well-formed TLV: verdict %d", ret)
				}
			}
			if n := stats(t, v.objs.OpotStats, id, drop.OPoTNoTLV); n != 2 {
				t.Fatalf("opot-no-tlv count %d, want 2", n)
			}
			// To the egress SID, a packet whose SRH does not parse is
			// a bypass attempt: the kernel's decap route would take it.
			if ret, _ := run(t, v.objs.SrchainOpotXdp, short); ret != xdpDrop {
				t.Fatalf("verify at XDP, SRH cut short: verdict %d, want drop", ret)
			}
			if n := stats(t, v.objs.OpotStats, id, drop.OPoTBypass); n != 1 {
				t.Fatalf("opot-bypass count %d, want 1", n)
			}
			other := frame(t, []netip.Addr{netip.MustParseAddr("fd00:1::e"), netip.MustParseAddr("fd00:ff::e")}, 0, m.SRv6TLV())
			for j, nd := range nodes {
				if ret, o := run(t, nd.objs.SrchainOpotXdp, other); ret != xdpPass || !bytes.Equal(o[:len(other)], other) {
					t.Fatalf("node %d at XDP: a packet of no OPoT chain was changed or dropped", j)
				}
			}
		})
	}
}

// TestChainCache: a stage answers from its per-CPU cache of chain
// lookups (opot_chain_cache) until the chains' generation changes. A
// transit whose chain entry was deleted still updates packets of that
// chain while the generation stands (the cache is what answers), and
// leaves them alone once TouchChains starts a new one; a new entry is
// seen after the next TouchChains; with generation 0 nothing is cached.
func TestChainCache(t *testing.T) {
	testutil.RequireRoot(t)
	// The cache is per CPU and a test run runs on the caller's CPU: stay
	// on one.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var all, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		t.Fatal(err)
	}
	defer unix.SchedSetaffinity(0, &all)
	one.Set(0)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		t.Fatal(err)
	}
	p, err := opot.GenerateFrom(rand.NewChaCha8([32]byte{7}), 3)
	if err != nil {
		t.Fatal(err)
	}
	nodes, travel := chainNodes(t, p, 3, 5, 0)
	m, err := opot.Init(p.Field(), nodes[0].n, 0, (1<<opot.RandBits)|1)
	if err != nil {
		t.Fatal(err)
	}
	tr := nodes[1].objs
	in := frame(t, travel, 0, m.SRv6TLV())
	updates := func() bool {
		_, o := run(t, tr.SrchainOpotTransit, in)
		return !bytes.Equal(o[:len(in)], in)
	}
	if !updates() {
		t.Fatal("the transit does not update its chain's packet")
	}
	ck := ChainKey{Last: travel[len(travel)-1].As16()}
	var entry Chain
	if err := tr.OpotChains.Lookup(&ck, &entry); err != nil {
		t.Fatal(err)
	}
	if err := tr.OpotChains.Delete(&ck); err != nil {
		t.Fatal(err)
	}
	if !updates() {
		t.Fatal("entry deleted, same generation: the cached lookup should still answer")
	}
	if err := TouchChains(tr.OpotChainGen); err != nil {
		t.Fatal(err)
	}
	if updates() {
		t.Fatal("entry deleted, new generation: the transit still updates")
	}
	if err := tr.OpotChains.Put(&ck, &entry); err != nil {
		t.Fatal(err)
	}
	if updates() {
		t.Fatal("entry back, same generation: the cached miss should still answer")
	}
	if err := TouchChains(tr.OpotChainGen); err != nil {
		t.Fatal(err)
	}
	if !updates() {
		t.Fatal("entry back, new generation: the transit does not update")
	}
	// Generation 0: every lookup goes to the hash map.
	if err := tr.OpotChainGen.Put(uint32(0), uint64(0)); err != nil {
		t.Fatal(err)
	}
	if err := tr.OpotChains.Delete(&ck); err != nil {
		t.Fatal(err)
	}
	if updates() {
		t.Fatal("generation 0: a deleted entry still answers")
	}
}
