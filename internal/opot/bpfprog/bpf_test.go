package bpfprog

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/srchain/srchain/internal/bpfrt"
	"github.com/srchain/srchain/internal/drop"
	"github.com/srchain/srchain/internal/opot"
	"github.com/srchain/srchain/internal/srv6"
	"github.com/srchain/srchain/internal/testutil"
)

// Operations of bpf/test/opot.c (OPOT_TEST_*).
const (
	opHeadend = 1
	opTransit = 2
	opVerify  = 3
	opMulMod  = 4
	opAddMod  = 5
)

const (
	tcActOK = 0
	xdpPass = 2
)

type harness struct {
	objs opotTestProgObjects
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	testutil.RequireRoot(t)
	spec, err := LoadSpec()
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{}
	if err := spec.LoadAndAssign(&h.objs, nil); err != nil {
		t.Fatalf("load opot test program: %v", err)
	}
	t.Cleanup(func() { h.objs.Close() })
	return h
}

func (h *harness) configure(t *testing.T, c opotTestProgOpotTestCfg) {
	t.Helper()
	if err := h.objs.OpotTestCfgs.Put(uint32(0), &c); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) cfg(t *testing.T) opotTestProgOpotTestCfg {
	t.Helper()
	var c opotTestProgOpotTestCfg
	if err := h.objs.OpotTestCfgs.Lookup(uint32(0), &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// run runs op for profile id through the tc or XDP program and returns
// whether it passed, the output frame and the drop reason counted.
func (h *harness) run(t *testing.T, op, profile, slot uint32, frame []byte, xdp bool) (bool, []byte, drop.Reason) {
	t.Helper()
	h.configure(t, opotTestProgOpotTestCfg{Op: op, Profile: profile, Slot: slot})
	before, err := bpfrt.ReadDropCounts(h.objs.DropCounters)
	if err != nil {
		t.Fatal(err)
	}
	opts := &ebpf.RunOptions{Data: frame, DataOut: make([]byte, len(frame)+256)}
	prog, pass := h.objs.SrchainOpotTest, uint32(tcActOK)
	if xdp {
		prog, pass = h.objs.SrchainOpotTestXdp, xdpPass
	}
	ret, err := prog.Run(opts)
	if err != nil {
		t.Fatalf("test run: %v", err)
	}
	after, err := bpfrt.ReadDropCounts(h.objs.DropCounters)
	if err != nil {
		t.Fatal(err)
	}
	reason := drop.None
	for r := range after {
		if after[r] != before[r] {
			if reason != drop.None {
				t.Fatalf("two drop counters moved: %v and %v", reason, drop.Reason(r))
			}
			reason = drop.Reason(r)
		}
	}
	return ret == pass, opts.DataOut, reason
}

// install puts profile p's nodes into the maps: node j of chain c under
// profile id nodeID(c, j) (one program plays every node), a zero
// sequence counter at the headend and an empty window at the verifier.
func (h *harness) install(t *testing.T, c int, slot uint8, p *opot.Profile) {
	t.Helper()
	for j := 0; j < p.K(); j++ {
		n, err := p.Node(j)
		if err != nil {
			t.Fatal(err)
		}
		k := Key{Index: nodeID(c, j), Slot: uint32(slot)}.Array()
		v := FromNode(n)
		if err := h.objs.OpotNodeParams.Put(k, &v); err != nil {
			t.Fatal(err)
		}
		switch n.Role {
		case opot.RoleHeadend:
			if err := h.objs.OpotSeqs.Put(k, uint64(0)); err != nil {
				t.Fatal(err)
			}
		case opot.RoleVerifier:
			if err := h.objs.OpotWindows.Put(k, &Window{}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func nodeID(chain, j int) uint32 { return uint32(chain*32 + j) }

var (
	outerSrc = netip.MustParseAddr("fc00:e::1")
	macA     = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xaa}
	macB     = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xbb}
)

// frameWith is an encapsulated UDP packet over nsegs segments whose SRH
// carries tlvs; it returns the frame and the offset of the first TLV.
func frameWith(t *testing.T, nsegs int, tlvs ...srv6.TLV) ([]byte, int) {
	t.Helper()
	travel := make([]netip.Addr, nsegs)
	for i := range travel {
		travel[i] = netip.MustParseAddr(fmt.Sprintf("fc00:%x::%x", i+1, i+1))
	}
	inner := srv6.UDP6(netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2"), 1000, 2000, []byte("opot"))
	l3, err := srv6.Encap(outerSrc, travel, inner, tlvs...)
	if err != nil {
		t.Fatal(err)
	}
	return srv6.Ether(macA, macB, srv6.EtherTypeIPv6, l3), srv6.EthernetHeaderLen + srv6.IPv6HeaderLen + srv6.SRHFixedLen + 16*nsegs
}

func profile(t *testing.T, rng *rand.Rand, k int) *opot.Profile {
	t.Helper()
	var seed [32]byte
	for i := range seed {
		seed[i] = byte(rng.Uint32())
	}
	p, err := opot.GenerateFrom(rand.NewChaCha8(seed), k)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func node(t *testing.T, p *opot.Profile, j int) opot.NodeParams {
	t.Helper()
	n, err := p.Node(j)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// withMeta returns a copy of frame with the TLV at off replaced by m.
func withMeta(frame []byte, off int, m opot.Meta) []byte {
	out := bytes.Clone(frame)
	copy(out[off:], m.AppendTo(nil))
	return out
}

func metaAt(t *testing.T, frame []byte, off int) opot.Meta {
	t.Helper()
	m, err := opot.ParseTLV(frame[off:])
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestBPFRoles keeps OPOT_ROLE_* and the drop.h reasons in step with Go.
func TestBPFRoles(t *testing.T) {
	var src []byte
	for _, f := range []string{"opot.h", "opot_tlv.h"} {
		b, err := os.ReadFile("../../../bpf/lib/" + f)
		if err != nil {
			t.Fatal(err)
		}
		src = append(src, b...)
	}
	for name, want := range map[string]int{
		"OPOT_ROLE_HEADEND": int(opot.RoleHeadend), "OPOT_ROLE_TRANSIT": int(opot.RoleTransit),
		"OPOT_ROLE_VERIFIER": int(opot.RoleVerifier), "OPOT_TLV_TYPE": int(opot.TLVType),
		"OPOT_TLV_LEN": opot.TLVLen, "OPOT_OFF_SLOT": opot.OffSlot, "OPOT_OFF_RND": opot.OffRND,
		"OPOT_OFF_CML": opot.OffCML, "OPOT_SLOTS": opot.Slots, "OPOT_RAND_BITS": opot.RandBits,
		"OPOT_WINDOW": opot.DefaultWindow, "OPOT_SLOT_UNFILLED": int(opot.SlotUnfilled),
		"OPOT_RESERVED_LEN": opot.ReservedLen,
	} {
		m := regexp.MustCompile(`#define ` + name + ` (\d+)`).FindSubmatch(src)
		if m == nil {
			t.Errorf("%s not defined", name)
			continue
		}
		if got, _ := strconv.Atoi(string(m[1])); got != want {
			t.Errorf("%s = %d, Go has %d", name, got, want)
		}
	}
}

// TestBPFMulMod61 compares mulmod61 and addmod61 in BPF with MulMod61
// and AddMod61 on edge and random inputs (both sides of p for addmod61).
func TestBPFMulMod61(t *testing.T) {
	h := newHarness(t)
	edges := []uint64{0, 1, 2, 3, 1<<29 - 1, 1 << 29, 1<<32 - 1, 1 << 32, 1<<32 + 1, 1<<60 - 1, 1 << 60, opot.P61/2 + 1, opot.P61 - 2, opot.P61 - 1}
	var pairs [][2]uint64
	for _, a := range edges {
		for _, b := range edges {
			pairs = append(pairs, [2]uint64{a, b})
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		pairs = append(pairs, [2]uint64{rng.Uint64N(opot.P61), rng.Uint64N(opot.P61)})
	}
	frame, _ := frameWith(t, 1)
	for _, op := range []struct {
		name string
		op   uint32
		gof  func(a, b uint64) uint64
	}{{"mulmod61", opMulMod, opot.MulMod61}, {"addmod61", opAddMod, opot.AddMod61}} {
		for _, pr := range pairs {
			h.configure(t, opotTestProgOpotTestCfg{Op: op.op, A: pr[0], B: pr[1]})
			if _, err := h.objs.SrchainOpotTest.Run(&ebpf.RunOptions{Data: frame}); err != nil {
				t.Fatal(err)
			}
			if got, want := h.cfg(t).Res, op.gof(pr[0], pr[1]); got != want {
				t.Fatalf("%s(%#x, %#x) = %#x in BPF, %#x in Go", op.name, pr[0], pr[1], got, want)
			}
		}
	}
}

// TestBPFChain runs random profiles k = 2..8 hop by hop: the BPF headend,
// each BPF transit in order and the BPF verifier, alternating tc and
// XDP, and checks every hop's packet byte for byte against the Go model.
func TestBPFChain(t *testing.T) {
	h := newHarness(t)
	rng := rand.New(rand.NewPCG(3, 4))
	for k := 2; k <= 8; k++ {
		p := profile(t, rng, k)
		f := p.Field()
		slot := uint8(k % 2)
		h.install(t, k, slot, p)
		var gv opot.Verifier
		if err := gv.Install(slot, p, opot.DefaultWindow); err != nil {
			t.Fatal(err)
		}
		for pkt := 1; pkt <= 4; pkt++ {
			xdp := pkt%2 == 0
			in, off := frameWith(t, k-1, opot.Meta{Slot: slot}.SRv6TLV())
			ok, out, r := h.run(t, opHeadend, nodeID(k, 0), uint32(slot), in, xdp)
			out = out[:len(in)]
			if !ok {
				t.Fatalf("k=%d packet %d: headend dropped: %v", k, pkt, r)
			}
			// The random bits come from bpf_get_prandom_u32: take RND from
			// the output and check the rest against Init.
			n0 := node(t, p, 0)
			rnd := metaAt(t, out, off).RND ^ n0.Enc.R
			if opot.SeqOf(rnd) != uint64(pkt) {
				t.Fatalf("k=%d: headend sequence %d, want %d", k, opot.SeqOf(rnd), pkt)
			}
			m, err := opot.Init(f, n0, slot, rnd)
			if err != nil {
				t.Fatal(err)
			}
			if want := withMeta(in, off, m); !bytes.Equal(out, want) {
				t.Fatalf("k=%d headend:\n got %x\nwant %x", k, out, want)
			}
			for j := 1; j < k-1; j++ {
				ok, next, r := h.run(t, opTransit, nodeID(k, j), 0, out, xdp)
				if !ok {
					t.Fatalf("k=%d transit %d dropped: %v", k, j, r)
				}
				if m, err = opot.Transit(f, node(t, p, j), m); err != nil {
					t.Fatal(err)
				}
				next = next[:len(in)]
				if want := withMeta(in, off, m); !bytes.Equal(next, want) {
					t.Fatalf("k=%d transit %d:\n got %x\nwant %x", k, j, next, want)
				}
				out = next
			}
			ok, after, r := h.run(t, opVerify, nodeID(k, k-1), 0, out, xdp)
			if !ok {
				t.Fatalf("k=%d packet %d: verifier dropped: %v", k, pkt, r)
			}
			if !bytes.Equal(after[:len(out)], out) {
				t.Fatalf("k=%d: verifier changed the packet", k)
			}
			seq, err := gv.Check(m)
			if err != nil || seq != uint64(pkt) || h.cfg(t).Res != seq {
				t.Fatalf("k=%d: go verifier %d, %v; bpf seq %d", k, seq, err, h.cfg(t).Res)
			}
		}
	}
}

// chainPacket is a legitimate packet of profile p with sequence number
// seq as it reaches the verifier, built by the Go model (byte-identical
// to the BPF path, TestBPFChain), with transits skipped or reordered by
// order (node indexes 1..k-2).
func chainPacket(t *testing.T, p *opot.Profile, slot uint8, seq uint64, order []int) (opot.Meta, opot.Meta) {
	t.Helper()
	f := p.Field()
	rnd, err := opot.PackRND(seq, uint32(seq*7919))
	if err != nil {
		t.Fatal(err)
	}
	m, err := opot.Init(f, node(t, p, 0), slot, rnd)
	if err != nil {
		t.Fatal(err)
	}
	first := m
	for _, j := range order {
		if m, err = opot.Transit(f, node(t, p, j), m); err != nil {
			t.Fatal(err)
		}
	}
	return first, m
}

// reasonFor maps the Go model's verifier errors to drop reasons.
func reasonFor(err error) drop.Reason {
	for e, r := range map[error]drop.Reason{opot.ErrVerify: drop.OPoTVerify, opot.ErrReplay: drop.OPoTReplay,
		opot.ErrStale: drop.OPoTStale, opot.ErrNoProfile: drop.OPoTNoProfile, opot.ErrTLV: drop.OPoTNoTLV} {
		if errors.Is(err, e) {
			return r
		}
	}
	if err != nil {
		return drop.Max
	}
	return drop.None
}

func inOrder(k int) []int {
	o := make([]int, 0, k)
	for j := 1; j < k-1; j++ {
		o = append(o, j)
	}
	return o
}

// TestBPFAttacks: skipped node, swapped pair, bit flips of RND and CML,
// forged TLVs, replays and stale packets are dropped by the BPF verifier
// with the reason the Go model gives.
func TestBPFAttacks(t *testing.T) {
	h := newHarness(t)
	rng := rand.New(rand.NewPCG(5, 6))
	for k := 3; k <= 8; k++ {
		p := profile(t, rng, k)
		h.install(t, k, 0, p)
		var gv opot.Verifier
		if err := gv.Install(0, p, opot.DefaultWindow); err != nil {
			t.Fatal(err)
		}
		seq := uint64(0)
		check := func(name string, m opot.Meta, want drop.Reason) {
			t.Helper()
			_, gerr := gv.Check(m)
			if reasonFor(gerr) != want {
				t.Fatalf("k=%d %s: go model says %v, want %v", k, name, gerr, want)
			}
			in, off := frameWith(t, k-1, opot.Meta{Slot: m.Slot}.SRv6TLV())
			for i, xdp := range []bool{false, true} {
				if i == 1 && want == drop.None {
					break // an accepted packet is a replay the second time
				}
				ok, _, r := h.run(t, opVerify, nodeID(k, k-1), 0, withMeta(in, off, m), xdp)
				if ok != (want == drop.None) || r != want {
					t.Fatalf("k=%d %s (xdp %v): pass %v reason %v, want %v", k, name, xdp, ok, r, want)
				}
			}
		}
		next := func(order []int) opot.Meta {
			seq++
			_, m := chainPacket(t, p, 0, seq, order)
			return m
		}
		legit := next(inOrder(k))
		check("legit", legit, drop.None)
		check("replay", legit, drop.OPoTReplay)
		for j := 1; j < k-1; j++ {
			skip := append(inOrder(k)[:j-1:j-1], inOrder(k)[j:]...)
			check(fmt.Sprintf("skip %d", j), next(skip), drop.OPoTVerify)
		}
		for j := 1; j+1 < k-1; j++ {
			o := inOrder(k)
			o[j-1], o[j] = o[j], o[j-1]
			check(fmt.Sprintf("swap %d,%d", j, j+1), next(o), drop.OPoTVerify)
		}
		for bit := 0; bit < 64; bit += 7 {
			m := next(inOrder(k))
			m.RND ^= 1 << bit
			check(fmt.Sprintf("rnd bit %d", bit), m, drop.OPoTVerify)
			m = next(inOrder(k))
			m.CML ^= 1 << bit
			check(fmt.Sprintf("cml bit %d", bit), m, drop.OPoTVerify)
		}
		check("forged", opot.Meta{RND: rng.Uint64(), CML: rng.Uint64()}, drop.OPoTVerify)
		check("no profile in slot 1", opot.Meta{Slot: 1, RND: legit.RND, CML: legit.CML}, drop.OPoTNoProfile)

		// Window: a jump, reordering inside it, then beyond it.
		_, far := chainPacket(t, p, 0, 5000, inOrder(k))
		check("jump", far, drop.None)
		_, late := chainPacket(t, p, 0, 5000-opot.DefaultWindow+1, inOrder(k))
		check("reordered in window", late, drop.None)
		check("reordered replay", late, drop.OPoTReplay)
		_, stale := chainPacket(t, p, 0, 5000-opot.DefaultWindow, inOrder(k))
		check("stale", stale, drop.OPoTStale)
	}
}

// TestBPFWindowModel drives the BPF verifier and the Go Verifier with the
// same random sequence numbers (jumps, reordering, duplicates) and
// compares every verdict.
func TestBPFWindowModel(t *testing.T) {
	h := newHarness(t)
	rng := rand.New(rand.NewPCG(7, 8))
	p := profile(t, rng, 3)
	h.install(t, 1, 0, p)
	var gv opot.Verifier
	if err := gv.Install(0, p, opot.DefaultWindow); err != nil {
		t.Fatal(err)
	}
	in, off := frameWith(t, 2, opot.Meta{}.SRv6TLV())
	top := uint64(1)
	for i := range 1500 {
		var seq uint64
		switch rng.IntN(4) {
		case 0:
			top += 1 + rng.Uint64N(200)
			seq = top
		case 1:
			seq = top + 1
			top++
		default:
			seq = max(1, top-min(top-1, rng.Uint64N(1200)))
		}
		_, m := chainPacket(t, p, 0, seq, []int{1})
		_, gerr := gv.Check(m)
		ok, _, r := h.run(t, opVerify, nodeID(1, 2), 0, withMeta(in, off, m), i%2 == 1)
		want := reasonFor(gerr)
		if ok != (gerr == nil) || r != want {
			t.Fatalf("event %d seq %d: bpf pass %v %v, go %v", i, seq, ok, r, gerr)
		}
	}
}

// installedTLV installs a 3-node profile's slot 0 for node 2 and returns
// the TLV node 1 leaves: node 2's well-formed input, which the malformed
// cases edit.
func installedTLV(t *testing.T, h *harness, rng *rand.Rand) srv6.TLV {
	t.Helper()
	p := profile(t, rng, 3)
	h.install(t, 2, 0, p)
	_, m := chainPacket(t, p, 0, 1, []int{1})
	return m.SRv6TLV()
}

// padN is a PadN TLV of n zero bytes.
func padN(n int) srv6.TLV { return srv6.TLV{Type: srv6.TLVPadN, Value: make([]byte, n)} }

// TestBPFMalformed: TLVs the Go codec rejects are dropped before any
// arithmetic, and a well-formed TLV at an odd offset still verifies.
func TestBPFMalformed(t *testing.T) {
	h := newHarness(t)
	good := installedTLV(t, h, rand.New(rand.NewPCG(9, 10)))
	val := func(edit func(v []byte) []byte) srv6.TLV {
		v := edit(bytes.Clone(good.Value))
		return srv6.TLV{Type: good.Type, Value: v}
	}

	for _, tc := range []struct {
		name string
		tlvs []srv6.TLV
		want drop.Reason
	}{
		{"no tlv", nil, drop.OPoTNoTLV},
		{"only padn", []srv6.TLV{padN(6)}, drop.OPoTNoTLV},
		{"short", []srv6.TLV{val(func(v []byte) []byte { return v[:14] })}, drop.OPoTNoTLV},
		{"long", []srv6.TLV{val(func(v []byte) []byte { return append(v, make([]byte, 8)...) })}, drop.OPoTNoTLV},
		{"slot 2", []srv6.TLV{val(func(v []byte) []byte { v[0] = 2; return v })}, drop.OPoTNoTLV},
		{"reserved set", []srv6.TLV{val(func(v []byte) []byte { v[3] = 1; return v })}, drop.OPoTNoTLV},
		{"slot 3", []srv6.TLV{val(func(v []byte) []byte { v[0] = 3; return v })}, drop.OPoTNoTLV},
		{"slot 255", []srv6.TLV{val(func(v []byte) []byte { v[0] = 255; return v })}, drop.OPoTNoTLV},
		{"reserved high bit", []srv6.TLV{val(func(v []byte) []byte { v[5] = 0x80; return v })}, drop.OPoTNoTLV},
		{"two tlvs", []srv6.TLV{good, good}, drop.OPoTNoTLV},
		{"misaligned", []srv6.TLV{padN(1), good, padN(3)}, drop.None},
		// The same checks off the fast path (the TLV not alone).
		{"misaligned slot 2", []srv6.TLV{padN(1), val(func(v []byte) []byte { v[0] = 2; return v }), padN(3)}, drop.OPoTNoTLV},
		{"misaligned reserved set", []srv6.TLV{padN(1), val(func(v []byte) []byte { v[2] = 1; return v }), padN(3)}, drop.OPoTNoTLV},
		{"after the route's padn", []srv6.TLV{good, padN(6)}, drop.None},
		{"slot 2 before the route's padn", []srv6.TLV{val(func(v []byte) []byte { v[0] = 2; return v }), padN(6)}, drop.OPoTNoTLV},
	} {
		in, _ := frameWith(t, 2, tc.tlvs...)
		if len(tc.tlvs) > 0 {
			// Go agrees: an SRH whose TLV area does not hold exactly one
			// valid OPoT TLV has no proof.
			s, _, err := srv6.FindSRH(in[srv6.EthernetHeaderLen:])
			if err == nil {
				_, _, err = opot.FindTLV(s)
			}
			if (err == nil) != (tc.want == drop.None) {
				t.Errorf("%s: go model: %v", tc.name, err)
			}
		}
		for _, xdp := range []bool{false, true} {
			_ = h.objs.OpotWindows.Put(Key{Index: nodeID(2, 2)}.Array(), &Window{})
			ok, _, r := h.run(t, opVerify, nodeID(2, 2), 0, in, xdp)
			if ok != (tc.want == drop.None) || r != tc.want {
				t.Errorf("%s (xdp %v): pass %v reason %v, want %v", tc.name, xdp, ok, r, tc.want)
			}
		}
	}
	// A TLV that runs past the SRH, and an SRH cut short.
	in, off := frameWith(t, 2, good)
	bad := bytes.Clone(in)
	bad[off+1] = 30
	if ok, _, r := h.run(t, opTransit, nodeID(2, 1), 0, bad, false); ok || r != drop.OPoTNoTLV {
		t.Errorf("tlv past the srh: pass %v reason %v", ok, r)
	}
	if ok, _, r := h.run(t, opTransit, nodeID(2, 1), 0, in[:off+10], false); ok || r != drop.SRHTruncated {
		t.Errorf("truncated srh: pass %v reason %v", ok, r)
	}
	// Headend without a sequence counter, and with its numbers used up.
	if ok, _, r := h.run(t, opHeadend, nodeID(9, 0), 0, in, false); ok || r != drop.OPoTNoProfile {
		t.Errorf("headend without profile: pass %v reason %v", ok, r)
	}
	if err := h.objs.OpotSeqs.Put(Key{Index: nodeID(2, 0)}.Array(), uint64(opot.MaxSeq)); err != nil {
		t.Fatal(err)
	}
	if ok, _, r := h.run(t, opHeadend, nodeID(2, 0), 0, in, false); ok || r != drop.OPoTSeqExhausted {
		t.Errorf("headend exhausted: pass %v reason %v", ok, r)
	}
}

// TestBPFTLVHeadRandom feeds the BPF verifier and the Go model the same
// random TLV heads: type and length kept (so the area tiles), the slot
// any value half the time, each reserved byte any value one time in 8,
// the TLV alone, after a PadN or before the route's PadN (the fast path
// and the walk). The BPF program finds no TLV exactly when opot.FindTLV
// finds none.
func TestBPFTLVHeadRandom(t *testing.T) {
	h := newHarness(t)
	rng := rand.New(rand.NewPCG(11, 12))
	good := installedTLV(t, h, rng)

	found, missed := 0, 0
	for i := range 2000 {
		v := bytes.Clone(good.Value)
		if rng.IntN(2) == 1 {
			v[0] = byte(rng.Uint32()) // the slot
		}
		for j := 1; j < 6; j++ { // the 5 reserved bytes
			if rng.IntN(8) == 0 {
				v[j] = byte(rng.Uint32())
			}
		}
		tlv := srv6.TLV{Type: good.Type, Value: v}
		var tlvs []srv6.TLV
		switch i % 3 {
		case 0:
			tlvs = []srv6.TLV{tlv}
		case 1:
			tlvs = []srv6.TLV{padN(6), tlv}
		default:
			tlvs = []srv6.TLV{tlv, padN(6)}
		}
		in, _ := frameWith(t, 2, tlvs...)
		s, _, err := srv6.FindSRH(in[srv6.EthernetHeaderLen:])
		if err != nil {
			t.Fatal(err)
		}
		_, _, goErr := opot.FindTLV(s)
		xdp := i%2 == 1
		_ = h.objs.OpotWindows.Put(Key{Index: nodeID(2, 2)}.Array(), &Window{})
		_, _, r := h.run(t, opVerify, nodeID(2, 2), 0, in, xdp)
		if (r == drop.OPoTNoTLV) != (goErr != nil) {
			t.Fatalf("head % x (tlvs %d, xdp %v): bpf %v, go %v", v[:6], i%3, xdp, r, goErr)
		}
		if goErr == nil {
			found++
		} else {
			missed++
		}
	}
	if found < 100 || missed < 100 {
		t.Fatalf("%d heads valid, %d not: the draw misses a side", found, missed)
	}
}

// verifierBudget is the most instructions the verifier may process per
// program, global subprograms included (the kernel's count covers every
// function it verifies). Measured when set (Linux 6.18): 4,650 for each,
// down from 305,979 when the TLV walk was inlined and explored once per
// caller state (docs/opot.md "Verifier cost"); about 2x headroom.
var verifierBudget = map[string]int{
	"srchain_opot_test":     10_000,
	"srchain_opot_test_xdp": 10_000,
}

// TestBPFVerifierStats reports the verifier's instruction counts and
// asserts the budgets.
func TestBPFVerifierStats(t *testing.T) {
	spec, err := LoadSpec()
	if err != nil {
		t.Fatal(err)
	}
	testutil.VerifierBudgets(t, spec, verifierBudget)
}
