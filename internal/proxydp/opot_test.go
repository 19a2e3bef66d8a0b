package proxydp

import (
	"bytes"
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/srchain/srchain/internal/drop"
	"github.com/srchain/srchain/internal/opot"
	"github.com/srchain/srchain/internal/opotdp"
	"github.com/srchain/srchain/internal/srv6"
	"github.com/srchain/srchain/internal/testutil"
)

// toSIDOPoT is toSID with an OPoT TLV (slot, RND = rnd, CML = ^rnd) in
// the SRH, behind a Pad1 so the TLV is not at the area's start.
func toSIDOPoT(t *testing.T, inner []byte, slot uint8, rnd uint64, travel ...netip.Addr) []byte {
	t.Helper()
	m := opot.Meta{Slot: slot, RND: rnd, CML: ^rnd >> 4}
	p, err := srv6.Encap(outerSrc, travel, inner, srv6.TLV{Type: srv6.TLVPad1}, m.SRv6TLV(),
		srv6.TLV{Type: srv6.TLVPadN, Value: make([]byte, 5)})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// tlvOf returns the OPoT TLV bytes of an SRv6 packet (the test's own
// parse, not the model's).
func tlvOf(t *testing.T, p []byte) []byte {
	t.Helper()
	i := bytes.Index(p[40:], []byte{opot.TLVType, opot.TLVLen - 2})
	if i < 0 {
		t.Fatalf("no OPoT TLV in %x", p)
	}
	return p[40+i : 40+i+opot.TLVLen]
}

// TestOPoTCarry: End.AD and End.AD.flow with OPoT give every packet
// coming back from the NF the OPoT TLV it arrived with, not the cached
// header's (the last packet's): per packet, taken once; a packet the
// proxy never sent, or sent back twice, is dropped (proxy-opot-miss).
// The cached header holds the TLV zeroed, so packets of one flow do not
// rewrite it.
func TestOPoTCarry(t *testing.T) {
	e := newEnv(t)
	travel := []netip.Addr{sidADOPoT, seg5, seg6}
	p1 := toSIDOPoT(t, udp6(64, 11), 0, 0x1111, travel...)
	p2 := toSIDOPoT(t, udp6(64, 22), 1, 0x2222, travel...)
	r1 := e.do(t, step{name: "ad opot sr->nf 1", l3: p1, want: ToNF})
	e.checkADCache(t, sidADOPoT)
	r2 := e.do(t, step{name: "ad opot sr->nf 2", l3: p2, want: ToNF})
	e.checkADCache(t, sidADOPoT)
	// Back in the other order: each with its own TLV.
	b2 := e.do(t, step{name: "ad opot nf->sr 2", in: e.in(sidADOPoT), l3: nfForward(r2.Packet), want: Forward})
	b1 := e.do(t, step{name: "ad opot nf->sr 1", in: e.in(sidADOPoT), l3: nfForward(r1.Packet), want: Forward})
	if !bytes.Equal(tlvOf(t, b1.Packet), tlvOf(t, p1)) || !bytes.Equal(tlvOf(t, b2.Packet), tlvOf(t, p2)) {
		t.Errorf("TLVs not carried:\n1 %x (sent %x)\n2 %x (sent %x)", tlvOf(t, b1.Packet), tlvOf(t, p1), tlvOf(t, b2.Packet), tlvOf(t, p2))
	}
	e.do(t, step{name: "ad opot nf->sr 1 again", in: e.in(sidADOPoT), l3: nfForward(r1.Packet), want: Drop, reason: drop.ProxyOPoTMiss})
	e.do(t, step{name: "ad opot nf->sr never sent", in: e.in(sidADOPoT), l3: udp6(63, 33), want: Drop, reason: drop.ProxyOPoTMiss})
	// A forwarding NF changes the hop limit only; one that rewrites the
	// packet (here: a port) loses its proof.
	r3 := e.do(t, step{name: "ad opot sr->nf 3", l3: toSIDOPoT(t, udp6(64, 44), 0, 0x4444, travel...), want: ToNF})
	e.do(t, step{name: "ad opot nf->sr rewritten", in: e.in(sidADOPoT), l3: mutate(nfForward(r3.Packet), func(q []byte) { q[41] = 9 }), want: Drop, reason: drop.ProxyOPoTMiss})
	// Without an OPoT TLV nothing is carried: the header goes back as cached.
	r4 := e.do(t, step{name: "ad no tlv sr->nf", l3: toSID(t, udp6(64, 55), travel...), want: ToNF})
	e.checkADCache(t, sidADOPoT)
	e.do(t, step{name: "ad no tlv nf->sr", in: e.in(sidADOPoT), l3: nfForward(r4.Packet), want: Forward})
	// A malformed OPoT TLV (slot 7) is not an OPoT TLV: not carried, cached as is.
	r5 := e.do(t, step{name: "ad bad tlv sr->nf", l3: toSIDOPoT(t, udp6(64, 66), 7, 0x6666, travel...), want: ToNF})
	e.checkADCache(t, sidADOPoT)
	e.do(t, step{name: "ad bad tlv nf->sr", in: e.in(sidADOPoT), l3: nfForward(r5.Packet), want: Forward})

	// A GSO packet from the NF (it aggregated packets) would leave with
	// one packet's proof in all its segments: dropped (opot-gso), its TLV
	// still kept, so the packet as one segment takes it.
	r6 := e.do(t, step{name: "ad opot sr->nf, back as gso", l3: toSIDOPoT(t, udp6(64, 88), 0, 0x8888, travel...), want: ToNF})
	gso := ether(EtherIPv6, nfForward(r6.Packet))
	before, err := e.p.Drops()
	if err != nil {
		t.Fatal(err)
	}
	in := uint32(e.in(sidADOPoT))
	opts := &ebpf.RunOptions{Data: gso, DataOut: make([]byte, len(gso)+2048), Context: testutil.SKB{IngressIfindex: in, Ifindex: in, GSOSegs: 2}}
	var ret uint32
	if err := e.ns.Do(func() (err error) { ret, err = e.p.NFProgram().Run(opts); return err }); err != nil || ret != tcActShot {
		t.Fatalf("gso packet from the nf: verdict %d (%v), want TC_ACT_SHOT", ret, err)
	}
	if after, err := e.p.Drops(); err != nil || after[drop.OPoTGSO] != before[drop.OPoTGSO]+1 {
		t.Errorf("gso packet from the nf: opot-gso drops %d (was %d, %v), want one more", after[drop.OPoTGSO], before[drop.OPoTGSO], err)
	}
	e.do(t, step{name: "ad opot nf->sr, one segment", in: e.in(sidADOPoT), l3: nfForward(r6.Packet), want: Forward})

	// Identical inner packets in flight at once (each with its own TLV):
	// each comes back with one of their TLVs, every TLV used once.
	sent := map[string]bool{}
	var back []byte
	for i := range 3 {
		p := toSIDOPoT(t, udp6(64, 77), 0, uint64(0x7000+i), travel...)
		sent[string(tlvOf(t, p))] = true
		back = e.do(t, step{name: fmt.Sprintf("ad opot identical sr->nf %d", i), l3: p, want: ToNF}).Packet
	}
	for i := range 3 {
		b := e.do(t, step{name: fmt.Sprintf("ad opot identical nf->sr %d", i), in: e.in(sidADOPoT), l3: nfForward(back), want: Forward})
		if got := string(tlvOf(t, b.Packet)); !sent[got] {
			t.Errorf("identical packet %d left with a TLV not kept or used twice: %x", i, got)
		}
		delete(sent, string(tlvOf(t, b.Packet)))
	}
	e.do(t, step{name: "ad opot identical nf->sr, one more", in: e.in(sidADOPoT), l3: nfForward(back), want: Drop, reason: drop.ProxyOPoTMiss})

	// End.AD.flow, IPv4 inner.
	ftravel := []netip.Addr{sidFlowOP, seg5}
	f1 := toSIDOPoT(t, udp4(64, 7), 0, 0x7777, ftravel...)
	f2 := toSIDOPoT(t, udp4(64, 7), 0, 0x8888, ftravel...) // same flow, another packet
	f2 = mutate(f2, func(q []byte) { q[len(q)-13] ^= 1 })  // ... whose first payload byte differs
	rf1 := e.do(t, step{name: "flow opot sr->nf 1", l3: f1, want: ToNF})
	rf2 := e.do(t, step{name: "flow opot sr->nf 2", l3: f2, want: ToNF})
	e.checkFlow(t, sidFlowOP, rf1.Packet)
	bf2 := e.do(t, step{name: "flow opot nf->sr 2", in: e.in(sidFlowOP), etherType: EtherIPv4, l3: nfForward(rf2.Packet), want: Forward})
	bf1 := e.do(t, step{name: "flow opot nf->sr 1", in: e.in(sidFlowOP), etherType: EtherIPv4, l3: nfForward(rf1.Packet), want: Forward})
	if !bytes.Equal(tlvOf(t, bf1.Packet), tlvOf(t, f1)) || !bytes.Equal(tlvOf(t, bf2.Packet), tlvOf(t, f2)) {
		t.Errorf("flow TLVs not carried")
	}
	e.do(t, step{name: "flow opot nf->sr 1 again", in: e.in(sidFlowOP), etherType: EtherIPv4, l3: nfForward(rf1.Packet), want: Drop, reason: drop.ProxyOPoTMiss})

	c, err := e.p.Counters()
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]uint64{
		"sid/" + sidADOPoT.String() + "/opot-save":   7,
		"sid/" + sidADOPoT.String() + "/opot-miss":   4,
		"sid/" + sidADOPoT.String() + "/cache-write": 4, // TLV packets share one header; then none, a bad TLV, TLV packets again
		"sid/" + sidFlowOP.String() + "/opot-save":   2,
		"sid/" + sidFlowOP.String() + "/opot-miss":   1,
		"drop/proxy-opot-miss":                       5,
	} {
		if c[k] != want {
			t.Errorf("counter %s = %d, want %d", k, c[k], want)
		}
	}
	// Only the rewritten packet's TLV is still kept (it goes stale).
	if n := e.keptTLVs(t); n != 1 {
		t.Errorf("%d TLVs kept, want 1", n)
	}
}

// keptTLVs counts the OPoT TLVs the proxy keeps: full slots and map
// entries.
func (e *env) keptTLVs(t *testing.T) int {
	t.Helper()
	n := 0
	var k proxyProgProxyOpotKey
	var v proxyProgProxyOpotTlv
	for it := e.p.objs.ProxyOpot.Iterate(); it.Next(&k, &v); {
		n++
	}
	var i uint32
	var sl proxyProgProxyOpotSlot
	for it := e.p.objs.ProxyOpotSlots.Iterate(); it.Next(&i, &sl); {
		if sl.State&3 == slotFull {
			n++
		}
	}
	return n
}

// slotFull is PROXY_SLOT_FULL.
const slotFull = 2

// TestOPoTSlots: a kept TLV goes to its slot when the slot is free or
// stale, else to the map, and the way back finds it in either: a slot
// held by another packet's fresh TLV (a hash collision) sends the packet
// to the map and is left alone; a stale one is taken over.
func TestOPoTSlots(t *testing.T) {
	e := newEnv(t)
	travel := []netip.Addr{sidADOPoT, seg5, seg6}
	inner := udp6(64, 91)
	r := e.do(t, step{name: "sr->nf", l3: toSIDOPoT(t, inner, 0, 0x9100, travel...), want: ToNF})
	i, sl := e.fullSlot(t)
	e.do(t, step{name: "nf->sr", in: e.in(sidADOPoT), l3: nfForward(r.Packet), want: Forward})
	if n := e.keptTLVs(t); n != 0 {
		t.Fatalf("%d TLVs kept after the way back, want 0", n)
	}

	// Another packet's fresh TLV in the slot.
	other := sl
	other.K.L4[15] ^= 0xff
	other.State = sl.State&^3 + 4 + slotFull
	other.Born = coarseNow(t)
	if err := e.p.objs.ProxyOpotSlots.Put(i, &other); err != nil {
		t.Fatal(err)
	}
	p := toSIDOPoT(t, inner, 0, 0x9101, travel...)
	r = e.do(t, step{name: "sr->nf, slot taken", l3: p, want: ToNF})
	if n := e.keptTLVs(t); n != 2 {
		t.Fatalf("%d TLVs kept, want 2 (the other's in the slot, this one in the map)", n)
	}
	b := e.do(t, step{name: "nf->sr from the map", in: e.in(sidADOPoT), l3: nfForward(r.Packet), want: Forward})
	if !bytes.Equal(tlvOf(t, b.Packet), tlvOf(t, p)) {
		t.Errorf("TLV from the map %x, want %x", tlvOf(t, b.Packet), tlvOf(t, p))
	}
	var got proxyProgProxyOpotSlot
	if err := e.p.objs.ProxyOpotSlots.Lookup(i, &got); err != nil || got != other {
		t.Errorf("the other packet's slot changed (%v): %+v", err, got)
	}

	// The same, stale: taken over.
	other.Born = coarseNow(t) - uint64(2*time.Hour)
	if err := e.p.objs.ProxyOpotSlots.Put(i, &other); err != nil {
		t.Fatal(err)
	}
	p = toSIDOPoT(t, inner, 0, 0x9102, travel...)
	r = e.do(t, step{name: "sr->nf, slot stale", l3: p, want: ToNF})
	if err := e.p.objs.ProxyOpotSlots.Lookup(i, &got); err != nil || got.K == other.K || got.State != other.State+4 {
		t.Errorf("stale slot not taken over (%v): %+v", err, got)
	}
	b = e.do(t, step{name: "nf->sr from the slot", in: e.in(sidADOPoT), l3: nfForward(r.Packet), want: Forward})
	if !bytes.Equal(tlvOf(t, b.Packet), tlvOf(t, p)) {
		t.Errorf("TLV from the slot %x, want %x", tlvOf(t, b.Packet), tlvOf(t, p))
	}
	if n := e.keptTLVs(t); n != 0 {
		t.Errorf("%d TLVs kept at the end, want 0", n)
	}
}

// fullSlot returns the one full OPoT slot.
func (e *env) fullSlot(t *testing.T) (uint32, proxyProgProxyOpotSlot) {
	t.Helper()
	var (
		i, at uint32
		sl    proxyProgProxyOpotSlot
		found proxyProgProxyOpotSlot
		n     int
	)
	for it := e.p.objs.ProxyOpotSlots.Iterate(); it.Next(&i, &sl); {
		if sl.State&3 == slotFull {
			at, found = i, sl
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d full slots, want 1", n)
	}
	return at, found
}

// coarseNow is bpf_ktime_get_coarse_ns.
func coarseNow(t *testing.T) uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC_COARSE, &ts); err != nil {
		t.Fatal(err)
	}
	return uint64(ts.Nano())
}

// TestOPoTCarryConcurrent: both CPUs keep and take TLVs at once through
// End.AD, each with up to 32 packets at the NF, a quarter of them the
// same inner packet on both CPUs (so slots, map entries and the queue of
// identical packets are raced for): every TLV kept comes back exactly
// once, none is missed or given twice. The slots' compare-and-swap and
// the queue's head under contention; a CPU that loses an identical
// packet's TLV to the other takes another (proxy_opot_commit): without
// that, about one run in three dropped a packet as opot-miss.
func TestOPoTCarryConcurrent(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Fatalf("%d CPUs: the test races two", runtime.NumCPU())
	}
	e := newEnv(t)
	travel := []netip.Addr{sidADOPoT, seg5, seg6}
	const n, lag, workers = 4000, 32, 2
	type result struct {
		sent, back [][]byte
		err        error
	}
	results := make([]result, workers)
	var wg sync.WaitGroup
	for cpu := range workers {
		// Built here: toSIDOPoT may call t.Fatal.
		var frames [][]byte
		for i := range n {
			sport := uint16(10000*cpu + i + 1)
			if i%4 == 0 {
				sport = 7 // the same inner packet on both CPUs
			}
			frames = append(frames, ether(EtherIPv6, toSIDOPoT(t, udp6(64, sport), 0, uint64(cpu)<<40|uint64(i), travel...)))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &results[cpu]
			r.err = e.ns.Do(func() error {
				var all, one unix.CPUSet
				if err := unix.SchedGetaffinity(0, &all); err != nil {
					return err
				}
				one.Set(cpu)
				if err := unix.SchedSetaffinity(0, &one); err != nil {
					return err
				}
				defer unix.SchedSetaffinity(0, &all)
				var atNF [][]byte
				back := func() error {
					f := ether(EtherIPv6, nfForward(atNF[0][ethLen:]))
					atNF = atNF[1:]
					opts := &ebpf.RunOptions{Data: f, DataOut: make([]byte, len(f)+1024),
						Context: testutil.SKB{IngressIfindex: uint32(e.in(sidADOPoT)), Ifindex: uint32(e.in(sidADOPoT))}}
					ret, err := e.p.NFProgram().Run(opts)
					if err != nil || ret == tcActShot {
						d, _ := e.p.Drops()
						return fmt.Errorf("cpu %d: nf side verdict %d (%v), drops %v", cpu, ret, err, d)
					}
					tlv, ok := findTLV(opts.DataOut[ethLen:])
					if !ok {
						return fmt.Errorf("cpu %d: a packet back without its TLV", cpu)
					}
					r.back = append(r.back, tlv)
					return nil
				}
				for _, f := range frames {
					opts := &ebpf.RunOptions{Data: f, DataOut: make([]byte, len(f)+1024),
						Context: testutil.SKB{IngressIfindex: uint32(e.sr), Ifindex: uint32(e.sr)}}
					ret, err := e.p.SRProgram().Run(opts)
					if err != nil || ret != tcActRedirect {
						return fmt.Errorf("cpu %d: sr side verdict %d (%v)", cpu, ret, err)
					}
					tlv, _ := findTLV(f[ethLen:])
					r.sent = append(r.sent, tlv)
					atNF = append(atNF, slices.Clone(opts.DataOut))
					if len(atNF) > lag {
						if err := back(); err != nil {
							return err
						}
					}
				}
				for len(atNF) > 0 {
					if err := back(); err != nil {
						return err
					}
				}
				return nil
			})
		}()
	}
	wg.Wait()
	count := map[string]int{}
	for _, r := range results {
		if r.err != nil {
			t.Fatal(r.err)
		}
		for _, tlv := range r.sent {
			count[string(tlv)]++
		}
		for _, tlv := range r.back {
			count[string(tlv)]--
		}
	}
	if len(count) != 2*n {
		t.Errorf("%d distinct TLVs sent, want %d", len(count), 2*n)
	}
	for tlv, c := range count {
		if c != 0 {
			t.Errorf("TLV %x: sent - returned = %d", tlv, c)
		}
	}
	if k := e.keptTLVs(t); k != 0 {
		t.Errorf("%d TLVs still kept", k)
	}
}

// findTLV is the OPoT TLV of an SRv6 packet (tlvOf without the test).
func findTLV(p []byte) ([]byte, bool) {
	if len(p) < 40 {
		return nil, false
	}
	i := bytes.Index(p[40:], []byte{opot.TLVType, opot.TLVLen - 2})
	if i < 0 || 40+i+opot.TLVLen > len(p) {
		return nil, false
	}
	return slices.Clone(p[40+i : 40+i+opot.TLVLen]), true
}

// TestOPoTTransitInProxy: a proxy loaded over the node's OPoT maps
// (Options.OPoT) does the node's transit itself (proxy_opot_hop) on the
// TLV it keeps while the packet is at the NF, for the chains whose entry
// the OPoT driver marks for the SID's program (opotdp.ChainInEnd), End.AD
// and End.AD.flow alike: the packet leaves with the TLV opot.Transit
// makes of the one it came with. A chain whose entry is not marked (a
// stage in front does its transit), an entry for another SID, a chain the
// node has no entry for, a slot without parameters and a malformed TLV
// (not carried, restored with the cached header) keep the TLV as it
// came. Program and model (Model.Hop) agree on every packet, the SR
// side's XDP twin included.
func TestOPoTTransitInProxy(t *testing.T) {
	testutil.RequireRoot(t)
	o, err := opotdp.Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	segX, segY := netip.MustParseAddr("fc00:2::7"), netip.MustParseAddr("fc00:2::8")
	type entry struct {
		sid, last netip.Addr
		marked    bool
		n         opot.NodeParams
		f         opot.Field
	}
	entries := []entry{
		{sid: sidADOPoT, last: seg6, marked: true},  // id 1
		{sid: sidFlowOP, last: seg5, marked: true},  // id 2
		{sid: sidADOPoT, last: segX, marked: false}, // id 3: a stage's
		{sid: seg5, last: segY, marked: true},       // id 4: another SID's
	}
	for i := range entries {
		en := &entries[i]
		p, err := opot.Generate(3)
		if err != nil {
			t.Fatal(err)
		}
		if en.n, err = p.Node(1); err != nil {
			t.Fatal(err)
		}
		en.f = p.Field()
		if err := opotdp.PutChain(o, uint32(i+1), 0, en.n, en.sid, en.last); err != nil {
			t.Fatal(err)
		}
		if en.marked {
			if err := opotdp.SetInEnd(o, en.last); err != nil {
				t.Fatal(err)
			}
		}
	}
	e := newEnvWith(t, opotdp.EndMapsOf(o))
	// want is the TLV a packet to da with segment[0] last comes back with.
	want := func(da, last netip.Addr, tlv [opot.TLVLen]byte) [opot.TLVLen]byte {
		for _, en := range entries {
			if !en.marked || en.sid != da || en.last != last {
				continue
			}
			m, err := opot.ParseTLV(tlv[:])
			if err != nil || m.Slot != 0 {
				return tlv // no parameters for slot 1
			}
			out, err := opot.Transit(en.f, en.n, m)
			if err != nil {
				t.Fatal(err)
			}
			return [opot.TLVLen]byte(out.AppendTo(nil))
		}
		return tlv
	}
	e.m.Hop = want

	for i, c := range []struct {
		name    string
		travel  []netip.Addr
		v4      bool
		slot    uint8
		updated bool
		xdp     bool // the SR side through the XDP twin
	}{
		{"ad, marked", []netip.Addr{sidADOPoT, seg5, seg6}, false, 0, true, false},
		{"ad, marked, slot 1 without parameters", []netip.Addr{sidADOPoT, seg5, seg6}, false, 1, false, false},
		{"ad, marked, malformed TLV (slot 7)", []netip.Addr{sidADOPoT, seg5, seg6}, false, 7, false, false},
		{"ad, a stage's entry", []netip.Addr{sidADOPoT, seg5, segX}, false, 0, false, false},
		{"ad, another SID's entry", []netip.Addr{sidADOPoT, seg5, segY}, false, 0, false, false},
		{"ad, no entry", []netip.Addr{sidADOPoT, seg5, netip.MustParseAddr("fc00:2::9")}, false, 0, false, false},
		{"ad.flow, marked", []netip.Addr{sidFlowOP, seg5}, true, 0, true, false},
		{"ad, marked, xdp", []netip.Addr{sidADOPoT, seg5, seg6}, false, 0, true, true},
		{"ad.flow, marked, xdp", []netip.Addr{sidFlowOP, seg5}, true, 0, true, true},
	} {
		for j := range 4 {
			name := fmt.Sprintf("%s %d", c.name, j)
			rnd := uint64(i)<<40 | uint64(j)<<20 | 0x5a5a
			sport := uint16(1000*i + j)
			inner, et := udp6(64, sport), uint16(0)
			if c.v4 {
				inner, et = udp4(64, sport), EtherIPv4
			}
			p := toSIDOPoT(t, inner, c.slot, rnd, c.travel...)
			sent := [opot.TLVLen]byte(tlvOf(t, p))
			var r Result
			if c.xdp {
				// doXDP checks the twin's output and moves the model.
				r = e.m.clone().FromSR(p)
				e.doXDP(t, name+" sr->nf xdp", ether(EtherIPv6, p))
			} else {
				r = e.do(t, step{name: name + " sr->nf", l3: p, want: ToNF})
			}
			b := e.do(t, step{name: name + " nf->sr", in: e.in(c.travel[0]), etherType: et, l3: nfForward(r.Packet), want: Forward})
			got := [opot.TLVLen]byte(tlvOf(t, b.Packet))
			exp := want(c.travel[0], c.travel[len(c.travel)-1], sent)
			if got != exp {
				t.Errorf("%s: left with TLV %x, want %x (sent %x)", name, got, exp, sent)
			}
			if (got != sent) != c.updated {
				t.Errorf("%s: TLV updated %v, want %v", name, got != sent, c.updated)
			}
		}
	}

	// In the XDP pipeline, a packet whose proof the OPoT stage in front
	// updated (PIPE_DONE_OPOT in its metadata: the stage read the entry
	// before the OPoT driver marked it) is carried as it came, not
	// updated a second time.
	travel := []netip.Addr{sidADOPoT, seg5, seg6}
	p := toSIDOPoT(t, udp6(64, 4242), 0, 0x77<<20|0x5a5a, travel...)
	sent := [opot.TLVLen]byte(tlvOf(t, p))
	e.m.Hop = nil
	r := e.m.FromSR(p)
	in := append([]byte{1, 0, 0, 0, 0, 0, pipeDoneOPoT, 0}, ether(EtherIPv6, p)...) // struct pipe_meta
	opts := &ebpf.RunOptions{
		Data:    in,
		DataOut: make([]byte, len(in)+256),
		Context: xdpCtx{Data: pipeMetaLen, DataEnd: uint32(len(in)), IngressIfindex: uint32(e.sr)},
	}
	if ret, _ := e.runXDP(t, "stage's proof, xdp", e.p.XDPProgram(), opts); ret != xdpRedirect {
		t.Fatalf("stage's proof, xdp: verdict %d, want a redirect to the NF", ret)
	}
	b := e.do(t, step{name: "stage's proof nf->sr", in: e.in(sidADOPoT), l3: nfForward(r.Packet), want: Forward})
	if got := [opot.TLVLen]byte(tlvOf(t, b.Packet)); got != sent {
		t.Errorf("stage's proof: left with TLV %x, want it as it came %x", got, sent)
	}
}

// pipeDoneOPoT is PIPE_DONE_OPOT (bpf/lib/pipeline.h).
const pipeDoneOPoT = 0x2
