package proxydp

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/srchain/srchain/internal/drop"
	"github.com/srchain/srchain/internal/srv6"
)

// withDestOpts inserts a Destination Options header of n bytes (a
// multiple of 8, >= 8, PadN filled) behind the SRH of p (SRH at 40).
func withDestOpts(p []byte, n int) []byte {
	srhLen := (int(p[41]) + 1) * 8
	at := 40 + srhLen
	d := make([]byte, n)
	d[0] = p[40] // what followed the SRH
	d[1] = byte(n/8 - 1)
	d[2], d[3] = 1, byte(n-4) // PadN over the rest
	q := append(append(append([]byte(nil), p[:at]...), d...), p[at:]...)
	q[40] = 60
	binary.BigEndian.PutUint16(q[4:6], uint16(len(q)-40))
	return q
}

// TestHeaderStack: End.AD caches every outer extension header (a
// Destination Options header behind the SRH comes back on restore), and
// drops a stack longer than PROXY_HDR_MAX.
func TestHeaderStack(t *testing.T) {
	e := newEnv(t)
	r := e.do(t, step{name: "ad6 with destopts", l3: withDestOpts(toSID(t, udp6(64, 1), sidAD6, seg5, seg6), 16), want: ToNF})
	e.checkADCache(t, sidAD6)
	e.do(t, step{name: "ad6 with destopts back", in: e.in(sidAD6), l3: nfForward(r.Packet), want: Forward})
	segs := []netip.Addr{sidAD6}
	for i := 0; i < 15; i++ {
		segs = append(segs, seg5)
	}
	e.do(t, step{name: "ad6 16 segments", l3: toSID(t, udp6(64, 1), segs...), want: ToNF})
	e.do(t, step{name: "ad6 header stack too big", l3: withDestOpts(toSID(t, udp6(64, 1), segs...), 256), want: Drop, reason: drop.ProxyHdrTooBig})
	// End.AS strips any stack (no cache), up to the decap limit.
	e.do(t, step{name: "as6 big stack", l3: withDestOpts(toSID(t, udp6(64, 1), append([]netip.Addr{sidAS6}, segs[1:]...)...), 256), want: ToNF})
}

// TestMutations feeds randomly corrupted variants of valid packets, both
// directions, to the programs and the model: same verdict, drop reason
// and bytes every time (the model and the programs share the caches'
// evolution, so a cache written by a mutated packet must match too).
func TestMutations(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { mutations(t, seed) })
	}
}

func mutations(t *testing.T, seed uint64) {
	e := newEnv(t)
	e.xdp = seed == 3 // one seed through the XDP twin too
	rng := rand.New(rand.NewPCG(seed, 2))
	var bases []step
	for _, sid := range []netip.Addr{sidAS6, sidAS4, sidAD6, sidAD4, sidAM, sidAMNAT, sidFlow, sidFlow4, sidADOPoT, sidFlowOP} {
		s := e.sids[sid]
		inner, et := udp6(64, 1), uint16(EtherIPv6)
		if s.Inner == ProtoIPv4 {
			inner, et = udp4(64, 1), EtherIPv4
		}
		in := toSID(t, inner, sid, seg5, seg6)
		if s.OPoT {
			in = toSIDOPoT(t, inner, 1, 0x1234, sid, seg5, seg6)
		}
		bases = append(bases, step{name: "sr " + sid.String(), l3: in})
		res := e.m.clone().FromSR(in) // e.do below moves the model
		back := nfForward(res.Packet)
		if s.Behavior == BehaviorAM || s.Behavior == BehaviorAMNAT {
			et = EtherIPv6
		}
		// Prime the program's caches as the model's (same packet).
		e.do(t, step{name: "prime " + sid.String(), l3: in, want: ToNF})
		bases = append(bases, step{name: "nf " + sid.String(), in: s.InIfindex, etherType: et, l3: back})
	}
	counts := map[Verdict]int{}
	for i := 0; i < 3000; i++ {
		b := bases[rng.IntN(len(bases))]
		p := append([]byte(nil), b.l3...)
		switch rng.IntN(4) {
		case 0: // one byte in the headers
			p[rng.IntN(min(len(p), 120))] = byte(rng.Uint32())
		case 1: // two bytes anywhere
			p[rng.IntN(len(p))] = byte(rng.Uint32())
			p[rng.IntN(len(p))] = byte(rng.Uint32())
		case 2: // truncate
			p = p[:40+rng.IntN(len(p)-40)] // test runs refuse shorter L3 headers
		case 3: // one SRH field
			if len(p) > 48 {
				p[40+rng.IntN(8)] = byte(rng.IntN(20))
			}
		}
		st := b
		st.l3 = p
		if len(p) >= 40 && netip.AddrFrom16([16]byte(p[24:40])) == sidIdle {
			continue // its 1 ms timeout runs on two clocks
		}
		var res Result
		// The model moves its caches (e.do moves them): ask a copy.
		if st.in == 0 {
			res = e.m.clone().FromSR(p)
		} else {
			// The model moves its caches: ask a copy first.
			res = e.m.clone().FromNF(st.in, st.etherType, p)
		}
		st.want, st.reason = res.Verdict, res.Reason
		e.do(t, st)
		counts[res.Verdict]++
		if t.Failed() {
			t.Fatalf("iteration %d (%s): %x", i, b.name, p)
		}
	}
	t.Logf("verdicts: %v", counts)
	for _, v := range []Verdict{Drop, ToNF, Forward, Pass} {
		if counts[v] == 0 {
			t.Errorf("no %v case among the mutations", v)
		}
	}
}

// FuzzModel: the model never panics, whatever the packet, and what it
// sends to the NF or forwards is no longer than the packet plus the
// largest header stack.
func FuzzModel(f *testing.F) {
	sids := []SID{
		{Addr: sidAS6, Behavior: BehaviorAS, OutIfindex: 1, InIfindex: 1, Inner: ProtoIPv6, Source: asSrc, Segments: []netip.Addr{seg5, seg6}},
		{Addr: sidAD6, Behavior: BehaviorAD, OutIfindex: 1, InIfindex: 2, Inner: ProtoIPv6},
		{Addr: sidAD4, Behavior: BehaviorAD, OutIfindex: 1, InIfindex: 3, Inner: ProtoIPv4},
		{Addr: sidAM, Behavior: BehaviorAM, OutIfindex: 1, InIfindex: 4},
		{Addr: sidAMNAT, Behavior: BehaviorAMNAT, OutIfindex: 1, InIfindex: 5},
		{Addr: sidFlow, Behavior: BehaviorADFlow, OutIfindex: 1, InIfindex: 6, Inner: ProtoIPv6},
		{Addr: sidFlow4, Behavior: BehaviorADFlow, OutIfindex: 1, InIfindex: 7, Inner: ProtoIPv4},
	}
	for _, s := range sids {
		inner := udp6(64, 1)
		if s.Inner == ProtoIPv4 {
			inner = udp4(64, 1)
		}
		p, err := srv6.Encap(outerSrc, []netip.Addr{s.Addr, seg5}, inner)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(p, uint8(0), true)
		f.Add(inner, uint8(s.InIfindex), s.Inner != ProtoIPv4)
	}
	f.Fuzz(func(t *testing.T, p []byte, in uint8, v6 bool) {
		m, err := NewModel(sids)
		if err != nil {
			t.Fatal(err)
		}
		var r Result
		if in == 0 {
			r = m.FromSR(p)
		} else {
			et := uint16(EtherIPv4)
			if v6 {
				et = EtherIPv6
			}
			// Twice: the first may fill a cache the second uses.
			m.FromSR(p)
			r = m.FromNF(int(in%8), et, p)
		}
		if len(r.Packet) > len(p)+HdrMax+1280 {
			t.Fatalf("%v packet of %d bytes from %d", r.Verdict, len(r.Packet), len(p))
		}
		if r.Verdict == Drop && r.Reason == drop.None || r.Verdict != Drop && r.Verdict != ICMP && r.Reason != drop.None ||
			r.Verdict == ICMP && r.Reason != drop.None && r.Reason != drop.HopLimit {
			t.Fatalf("verdict %v with reason %v", r.Verdict, r.Reason)
		}
	})
}
