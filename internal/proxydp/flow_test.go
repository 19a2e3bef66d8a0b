package proxydp

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/srchain/srchain/internal/drop"
)

// TestFlowHeaderTable: End.AD.flow keeps one copy per distinct outer
// header stack (a slot of the SID's header table) and a small per-flow
// entry pointing at it; program and model agree on every packet, on the
// slots and on the counters.
func TestFlowHeaderTable(t *testing.T) {
	e := newEnv(t)
	counter := func(sid netip.Addr, stat string) uint64 {
		t.Helper()
		c, err := e.p.Counters()
		if err != nil {
			t.Fatal(err)
		}
		return c["sid/"+sid.String()+"/"+stat]
	}
	wantCounter := func(sid netip.Addr, stat string, want uint64) {
		t.Helper()
		if got := counter(sid, stat); got != want {
			t.Errorf("counter %s/%s = %d, want %d", sid, stat, got, want)
		}
	}
	// label sets the outer flow label and traffic class (seg6_flowlabel,
	// the inner DSCP copied): per flow, not part of the shared header.
	label := func(p []byte, tc uint8, fl uint32) []byte {
		return mutate(p, func(q []byte) {
			q[0] = 0x60 | tc>>4
			q[1] = tc<<4 | byte(fl>>16&0x0f)
			q[2], q[3] = byte(fl>>8), byte(fl)
		})
	}

	// Two flows (their own flow labels) over one chain share one slot.
	a := e.do(t, step{name: "share sr->nf a", l3: label(toSID(t, udp6(64, 1000), sidFlow, seg5, seg6), 0x20, 0x12345), want: ToNF})
	b := e.do(t, step{name: "share sr->nf b", l3: label(toSID(t, udp6(64, 1001), sidFlow, seg5, seg6), 0, 0xabcde), want: ToNF})
	e.checkFlow(t, sidFlow, a.Packet)
	e.checkFlow(t, sidFlow, b.Packet)
	_, sa, ok := e.flowHdr(t, sidFlow, a.Packet)
	_, sb, ok2 := e.flowHdr(t, sidFlow, b.Packet)
	if !ok || !ok2 || sa != sb {
		t.Errorf("flows over one chain: slots %d (%v) and %d (%v), want one shared slot", sa, ok, sb, ok2)
	}
	wantCounter(sidFlow, "hdr-write", 1)
	wantCounter(sidFlow, "cache-write", 2)
	// Repeated packets rewrite nothing.
	e.do(t, step{name: "share sr->nf a again", l3: label(toSID(t, udp6(64, 1000), sidFlow, seg5, seg6), 0x20, 0x12345), want: ToNF})
	wantCounter(sidFlow, "cache-write", 2)
	// Each gets its own first word back (byte-compared with the model).
	e.do(t, step{name: "share nf->sr a", in: e.in(sidFlow), l3: nfForward(a.Packet), want: Forward})
	e.do(t, step{name: "share nf->sr b", in: e.in(sidFlow), l3: nfForward(b.Packet), want: Forward})

	// A new header for flow a (another chain): a points at a new slot,
	// b still at the old one, and each gets its own header back.
	a = e.do(t, step{name: "change sr->nf a", l3: label(toSID(t, udp6(64, 1000), sidFlow, seg6), 0x20, 0x12345), want: ToNF})
	e.checkFlow(t, sidFlow, a.Packet)
	e.checkFlow(t, sidFlow, b.Packet)
	wantCounter(sidFlow, "hdr-write", 2)
	wantCounter(sidFlow, "cache-write", 3)
	e.do(t, step{name: "change nf->sr a", in: e.in(sidFlow), l3: nfForward(a.Packet), want: Forward})
	e.do(t, step{name: "change nf->sr b (old header)", in: e.in(sidFlow), l3: nfForward(b.Packet), want: Forward})

	// A full bucket: five headers that hash to one bucket of four ways.
	// The fifth replaces a way; the flow that pointed at it misses on
	// the way back (counted), the others still hit, and the missing
	// flow's next packet from the SR side takes a slot again.
	type cand struct {
		sport uint16
		pkt   []byte
	}
	byBucket := map[uint32][]cand{}
	var full []cand
	for i := 0; i < 400 && full == nil; i++ {
		c := cand{sport: uint16(3000 + i), pkt: toSID(t, udp6(64, uint16(3000+i)), sidFlow, netip.MustParseAddr(fmt.Sprintf("fc00:2::%x", 0x100+i)), seg6)}
		m := e.m.clone()
		r := m.FromSR(c.pkt)
		_, slot, _, ok := m.Flow(e.sids[sidFlow], r.Packet)
		if !ok {
			t.Fatal("model: no flow after sr->nf")
		}
		bk := slot / hdrWays
		byBucket[bk] = append(byBucket[bk], c)
		if len(byBucket[bk]) == hdrWays+1 {
			full = byBucket[bk]
		}
	}
	if full == nil {
		t.Fatal("no five headers in one bucket among 400")
	}
	replaced := e.m.Replaced
	inner := make([][]byte, len(full))
	for i, c := range full {
		inner[i] = e.do(t, step{name: fmt.Sprintf("bucket sr->nf %d", i), l3: c.pkt, want: ToNF}).Packet
	}
	if e.m.Replaced != replaced+1 {
		t.Fatalf("model replaced %d slots, want 1", e.m.Replaced-replaced)
	}
	misses := 0
	var missed int
	for i := range full {
		_, _, _, hit := e.m.Flow(e.sids[sidFlow], inner[i])
		st := step{name: fmt.Sprintf("bucket nf->sr %d", i), in: e.in(sidFlow), l3: nfForward(inner[i]), want: Forward}
		if !hit {
			st.want, st.reason = Drop, drop.ProxyFlowMiss
			misses++
			missed = i
			if _, _, ok := e.flowHdr(t, sidFlow, inner[i]); ok {
				t.Errorf("flow %d: its slot was replaced, yet the program's entry still matches it", i)
			}
		}
		e.do(t, st)
	}
	if misses != 1 || missed == len(full)-1 {
		t.Errorf("%d flows missed (the last %d), want exactly one of the first four", misses, missed)
	}
	e.do(t, step{name: "bucket sr->nf again", l3: full[missed].pkt, want: ToNF})
	e.checkFlow(t, sidFlow, inner[missed])
	e.do(t, step{name: "bucket nf->sr again", in: e.in(sidFlow), l3: nfForward(inner[missed]), want: Forward})
	wantCounter(sidFlow, "hdr-replace", uint64(e.m.Replaced))
	wantCounter(sidFlow, "cache-miss", 1)

	// Idle timeout (1 ms): the flow misses; its header slot stays and
	// its next packet (and another flow's) reuse it without a write.
	r := e.do(t, step{name: "idle sr->nf", l3: toSID(t, udp6(64, 1), sidIdle, seg5), want: ToNF})
	time.Sleep(20 * time.Millisecond)
	e.m.Now += time.Second
	e.do(t, step{name: "idle nf->sr", in: e.in(sidIdle), l3: nfForward(r.Packet), want: Drop, reason: drop.ProxyFlowMiss})
	e.do(t, step{name: "idle sr->nf again", l3: toSID(t, udp6(64, 1), sidIdle, seg5), want: ToNF})
	r = e.do(t, step{name: "idle sr->nf other flow", l3: toSID(t, udp6(64, 2), sidIdle, seg5), want: ToNF})
	e.checkFlow(t, sidIdle, r.Packet)
	wantCounter(sidIdle, "hdr-write", 1)
	wantCounter(sidIdle, "cache-write", 2)
	wantCounter(sidIdle, "cache-miss", 1)
}

// TestFlowCacheFull: a full End.AD.flow cache evicts the flows idle
// beyond their SID's timeout to take a new one, and drops the new flow
// (cache-full, proxy-cache-full) when none is idle: live flows are never
// pushed out (issue 9).
func TestFlowCacheFull(t *testing.T) {
	e := newEnv(t)
	p, err := Load(Options{FlowCapacity: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	sids := []SID{e.sids[sidFlow], e.sids[sidIdle]} // idle timeouts 1 h and 1 ms
	if err := p.SetSIDs(sids); err != nil {
		t.Fatal(err)
	}
	send := func(sid netip.Addr, sport uint16) uint32 {
		t.Helper()
		ret, _ := e.run(t, p.SRProgram(), e.sr, ether(EtherIPv6, toSID(t, udp6(64, sport), sid, seg5)))
		return ret
	}
	full := func() uint64 {
		t.Helper()
		d, err := p.Drops()
		if err != nil {
			t.Fatal(err)
		}
		return d[drop.ProxyCacheFull]
	}
	// Two live flows, two soon idle ones: the cache is full.
	for i, f := range []struct {
		sid   netip.Addr
		sport uint16
	}{{sidFlow, 1}, {sidFlow, 2}, {sidIdle, 3}, {sidIdle, 4}} {
		if ret := send(f.sid, f.sport); ret != tcActRedirect {
			t.Fatalf("flow %d: verdict %d", i, ret)
		}
	}
	time.Sleep(20 * time.Millisecond) // > the 1 ms timeout and a jiffy
	// A new flow: the idle ones go, it gets in; so does another.
	for _, sport := range []uint16{5, 6} {
		if ret := send(sidFlow, sport); ret != tcActRedirect {
			t.Fatalf("new flow %d after the idle ones: verdict %d (cache-full drops %d)", sport, ret, full())
		}
	}
	// Four live flows now: a fifth is dropped and counted, in this jiffy
	// and after the next one's sweep alike (nothing is idle).
	before := full()
	if ret := send(sidFlow, 7); ret != tcActShot {
		t.Fatalf("fifth live flow: verdict %d, want drop", ret)
	}
	time.Sleep(20 * time.Millisecond)
	if ret := send(sidFlow, 8); ret != tcActShot {
		t.Fatalf("fifth live flow after a sweep: verdict %d, want drop", ret)
	}
	if got := full() - before; got != 2 {
		t.Errorf("drop/proxy-cache-full moved by %d, want 2", got)
	}
	// The live flows kept their entries.
	for _, sport := range []uint16{1, 2, 5, 6} {
		if ret := send(sidFlow, sport); ret != tcActRedirect {
			t.Errorf("live flow %d: verdict %d", sport, ret)
		}
	}
}
