package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	cebpf "github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/srchain/srchain/internal/datapath"
	"github.com/srchain/srchain/internal/drop"
	"github.com/srchain/srchain/internal/srv6"
)

// endCase is one packet sent through both lines.
type endCase struct {
	name string
	ip   []byte // IPv6 packet (framed by the test)
	// reason is what srchain's End must count when it drops the packet;
	// drop.None means both must forward it (and byte-identically).
	reason drop.Reason
	// passes: the packet is not for srchain (not a SID, or not even an
	// IPv6 header it can read); what the kernel does is compared, no
	// counter may move.
	passes bool
	// noRef: valid, but outside srv6.MutateEnd's model (a second End on
	// the same node); only the kernel comparison applies.
	noRef bool
	// icmp: the endpoint answers with an ICMPv6 error (Time Exceeded),
	// byte-identical from every line; nothing reaches the receiver and
	// no drop counter moves (the program hands the packet to the stack).
	icmp bool
}

func endPkt(t *testing.T, dst netip.Addr, hl uint8, s srv6.SRH, payload string) []byte {
	t.Helper()
	inner := srv6.UDP6(endSrc, endNext2, 1000, 2000, []byte(payload))
	srh, err := s.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	h := srv6.IPv6{HopLimit: hl, TrafficClass: 0x28, FlowLabel: 0x12345, NextHeader: srv6.ProtoRouting, Src: endSrc, Dst: dst, PayloadLen: uint16(len(srh) + len(inner))}
	return append(append(h.AppendTo(nil), srh...), inner...)
}

func endSRH(travel ...netip.Addr) srv6.SRH { return srv6.NewSRH(srv6.ProtoIPv6, travel) }

func endSet(pkt []byte, off int, v byte) []byte {
	out := append([]byte(nil), pkt...)
	out[off] = v
	return out
}

func endSegs(n int) []netip.Addr {
	out := []netip.Addr{endSID}
	for i := 1; i < n; i++ {
		out = append(out, netip.AddrFrom16([16]byte{0xfc, 0, 0, 2, 15: byte(0x10 + i)}))
	}
	return out
}

func endCases(t *testing.T) []endCase {
	valid := endPkt(t, endSID, 64, endSRH(endSID, endNext, endNext2), "three segments")
	withTLV := func(tlvs ...srv6.TLV) []byte {
		s := endSRH(endSID, endNext, endNext2)
		s.TLVs = tlvs
		return endPkt(t, endSID, 64, s, "tlvs")
	}
	hbh := append([]byte(nil), valid[:40]...)
	hbh[6] = srv6.ProtoHopByHop
	binary.BigEndian.PutUint16(hbh[4:6], binary.BigEndian.Uint16(valid[4:6])+8)
	hbh = append(append(hbh, srv6.ProtoRouting, 0, 1, 4, 0, 0, 0, 0), valid[40:]...)
	// HMAC TLV (RFC 8754 2.1.2): reserved, key id 7, 32 bytes of HMAC.
	hmac := srv6.HMACTLV{KeyID: 7, HMAC: bytes.Repeat([]byte{0xab}, 32)}.TLV()
	const so = 40 // SRH offset in the packets without extension headers
	badTLV := withTLV(srv6.TLV{Type: 0x80, Value: []byte{1, 2, 3, 4}})
	badTLV = endSet(badTLV, so+8+48+1, 100)
	plenZero := append([]byte(nil), valid...)
	binary.BigEndian.PutUint16(plenZero[4:6], 0)
	// 8 TLV bytes after the three segments, written raw (the Pad1
	// difference of docs/datapath.md).
	rawTLVs := func(b ...byte) []byte {
		pkt := withTLV(srv6.TLV{Type: 0x80, Value: make([]byte, 6)})
		if pkt[so+srv6.SRHOffHdrExtLen] != 7 {
			t.Fatalf("unexpected SRH length %d", pkt[so+srv6.SRHOffHdrExtLen])
		}
		copy(pkt[so+8+48:], b)
		return pkt
	}

	return []endCase{
		{name: "SL 2->1", ip: valid},
		{name: "SL 1->0", ip: endPkt(t, endSID, 64, func() srv6.SRH { s := endSRH(endNext, endSID, endNext2); s.SegmentsLeft = 1; return s }(), "last")},
		{name: "two segments", ip: endPkt(t, endSID, 64, endSRH(endSID, endNext), "two")},
		{name: "sixteen segments", ip: endPkt(t, endSID, 64, endSRH(append(endSegs(15), endNext)...), "sixteen")},
		{name: "hop limit 2", ip: endPkt(t, endSID, 2, endSRH(endSID, endNext), "hl2")},
		{name: "hop limit 255", ip: endPkt(t, endSID, 255, endSRH(endSID, endNext), "hl255")},
		{name: "experimental TLV + padding", ip: withTLV(srv6.TLV{Type: 0x80, Value: []byte{1, 2, 3, 4}})},
		{name: "PadN TLV", ip: withTLV(srv6.TLV{Type: srv6.TLVPadN, Value: make([]byte, 6)})},
		{name: "two TLVs", ip: withTLV(srv6.TLV{Type: 0x81, Value: []byte{9, 9}}, srv6.TLV{Type: 0x82, Value: make([]byte, 10)})},
		// Handed to the kernel's own End (slow path): its result.
		{name: "hop-by-hop before SRH", ip: hbh, passes: true},
		{name: "HMAC TLV without H flag", ip: withTLV(hmac)},
		{name: "H flag with HMAC TLV", ip: endSet(withTLV(hmac), so+srv6.SRHOffFlags, 0x08), passes: true},
		{name: "H flag without HMAC TLV", ip: endSet(valid, so+srv6.SRHOffFlags, 0x08)},
		{name: "other flags", ip: endSet(withTLV(hmac), so+srv6.SRHOffFlags, 0x80)},
		{name: "large payload", ip: endPkt(t, endSID, 64, endSRH(endSID, endNext), string(bytes.Repeat([]byte("x"), 1200)))},
		{name: "trailing bytes", ip: append(append([]byte(nil), valid...), 1, 2, 3, 4, 5, 6, 7, 8), passes: true},

		// End.X (RFC 8986 4.2): forwarded to the adjacency whatever the
		// routes say; fc00:9::1 has no route on the endpoint.
		{name: "End.X", ip: endPkt(t, endSIDX, 64, endSRH(endSIDX, endNoRoute, endNext2), "endx")},
		{name: "End.X last segment", ip: endPkt(t, endSIDX, 9, func() srv6.SRH { s := endSRH(endNext, endSIDX, endNoRoute); s.SegmentsLeft = 1; return s }(), "endx last")},
		// Hop limit <= 1: both rewrite, then ip6_forward answers with
		// ICMPv6 Time Exceeded quoting the rewritten packet.
		{name: "End.X hop limit 1", ip: endPkt(t, endSIDX, 1, endSRH(endSIDX, endNext), "endx hl1"), icmp: true},
		{name: "End.X hop limit 0", ip: endPkt(t, endSIDX, 0, endSRH(endSIDX, endNext), "endx hl0"), icmp: true},
		// The kernel's End.X handles an exhausted hop limit itself now
		// (the program passes before rewriting): Time Exceeded.
		{name: "End.X hop limit 1, no route to the next SID", ip: endPkt(t, endSIDX, 1, endSRH(endSIDX, endNoRoute), "endx hl1 nr"), icmp: true},
		{name: "End.X SL zero", ip: endSet(endPkt(t, endSIDX, 64, endSRH(endSIDX, endNoRoute), "endx sl0"), so+srv6.SRHOffSegmentsLeft, 0), passes: true},

		{name: "not a SID", ip: srv6.UDP6(endSrc, endNonSID, 5, 6, []byte("plain")), passes: true},
		{name: "SRv6 not for this node", ip: endPkt(t, endNext, 64, endSRH(endNext, endNext2), "transit"), passes: true},
		{name: "truncated IPv6 header", ip: valid[:30], passes: true},

		{name: "no SRH", ip: srv6.UDP6(endSrc, endSID, 5, 6, []byte("nosrh")), passes: true},
		{name: "payload length past end", ip: valid[:len(valid)-8], passes: true},
		{name: "payload length zero", ip: plenZero, passes: true},
		{name: "routing type 2", ip: endSet(valid, so+srv6.SRHOffRoutingType, 2), reason: drop.SRHBadType},
		{name: "routing type 3", ip: endSet(valid, so+srv6.SRHOffRoutingType, 3), reason: drop.SRHBadType},
		{name: "hdr ext len too small", ip: endSet(valid, so+srv6.SRHOffHdrExtLen, 4), reason: drop.SRHBadLen},
		{name: "hdr ext len past packet", ip: endSet(valid, so+srv6.SRHOffHdrExtLen, 200), reason: drop.SRHTruncated},
		{name: "last entry beyond hdr ext len", ip: endSet(valid, so+srv6.SRHOffLastEntry, 5), reason: drop.SRHBadLen},
		{name: "SL over last entry + 1", ip: endSet(valid, so+srv6.SRHOffSegmentsLeft, 4), reason: drop.SRHSLOverLast},
		// RFC 8986 4.1 S06: SL = last entry + 1 is legal; End moves to
		// segment[last entry], here the SID itself, so both datapaths
		// run End a second time on the same node.
		{name: "SL = last entry + 1", ip: endSet(valid, so+srv6.SRHOffSegmentsLeft, 3), passes: true},
		{name: "next SID on the same node", ip: endPkt(t, endSID, 64, endSRH(endSID, endSID, endNext), "twice"), passes: true},
		// Beyond SRCHAIN_MAX_SEGS (16) segments: the kernel's End.
		{name: "seventeen segments", ip: endPkt(t, endSID, 64, endSRH(append(endSegs(16), endNext)...), "seventeen"), passes: true},
		{name: "SL zero", ip: endSet(valid, so+srv6.SRHOffSegmentsLeft, 0), passes: true},
		{name: "hop limit 1", ip: endPkt(t, endSID, 1, endSRH(endSID, endNext), "hl1"), icmp: true},
		{name: "hop limit 0", ip: endPkt(t, endSID, 0, endSRH(endSID, endNext), "hl0"), icmp: true},
		{name: "hop limit 1, three segments", ip: endPkt(t, endSID, 1, endSRH(endSID, endNext, endNext2), "hl1 3"), icmp: true},
		// Hop limit 1 and the next SID on the same node: both run End
		// again (no hop limit check between the passes), then Time
		// Exceeded.
		{name: "hop limit 1, next SID on the same node", ip: endPkt(t, endSID, 1, endSRH(endSID, endSID, endNext), "hl1 twice"), icmp: true},
		// The fast path reads TLVs as the kernel does (type 0 is a
		// TLV with a length, not RFC 8754's 1-byte Pad1): same result.
		{name: "Pad1 | type 5 len 4 | Pad1", ip: rawTLVs(0x00, 0x05, 0x04, 0, 0, 0, 0, 0x00), reason: drop.TLVBad},
		{name: "type 0 len 6", ip: rawTLVs(0x00, 0x06, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), noRef: true},
		{name: "TLV overruns SRH", ip: badTLV, reason: drop.TLVBad},
	}
}

// oursLine is a line whose endpoint runs srchain's End.
type oursLine struct {
	name string
	*endLine
	end       *datapath.End
	forwarded int
}

// endKernelRoutes are the kernel's seg6local routes of endSID and
// endSIDX: the whole datapath of the kernel line, the slow path of ours.
var endKernelRoutes = [][]string{
	{"-6", "route", "add", endSID.String() + "/128", "encap", "seg6local", "action", "End", "dev", endIf("e0")},
	{"-6", "route", "add", endSIDX.String() + "/128", "encap", "seg6local", "action", "End.X", "nh6", endRecv.String(), "dev", endIf("e0")},
	{"-6", "route", "add", endSIDC.String(), "encap", "seg6local", "action", "End", "flavors", "next-csid", "lblen", "32", "nflen", "16", "dev", endIf("e0")},
}

// endSIDC is an End SID with the NEXT-C-SID flavor (RFC 9800): block
// fc00:2::/32, C-SID 000c (16 bits); a container fc00:2:c:0:B:C:D:E
// shifts to fc00:2:0:B:C:D:E:0, inside the route to the receiver.
var endSIDC = netip.MustParsePrefix("fc00:2:c::/48")

// TestEndDifferential sends the same packets through a kernel seg6local
// End / End.X and through srchain's tc End (line "b") and tc + XDP End
// (line "x"), and requires every receiver to see the same bytes (whole
// Ethernet frames: all lines use the same MACs), and malformed packets to
// be dropped by all and counted by reason by ours.
func TestEndDifferential(t *testing.T) {
	endRequireRoot(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	// Run counts per program, to prove the XDP twin did the work on line
	// x (released when the test ends).
	if st, err := cebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME)); err == nil {
		t.Cleanup(func() { st.Close() })
	}
	kern := newEndLine(t, "k")
	for _, args := range endKernelRoutes {
		if _, err := kern.e.Run(ctx, "ip", args...); err != nil {
			t.Fatal(err)
		}
	}
	var ours []*oursLine
	for _, tag := range []string{"b", "x"} {
		l := &oursLine{name: map[string]string{"b": "tc", "x": "tc+xdp"}[tag], endLine: newEndLine(t, tag)}
		end, err := datapath.LoadEnd(datapath.EndOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { end.Close() })
		l.end = end
		err = l.e.Do(func() error {
			if err := end.Attach(l.eIn); err != nil {
				return err
			}
			if tag == "x" {
				return end.AttachXDP(l.eIn)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if tag == "x" {
			// XDP_REDIRECT into a veth needs NAPI on the peer.
			if _, err := l.r.Run(ctx, "ethtool", "-K", endIf("r0"), "gro", "on"); err != nil {
				t.Fatal(err)
			}
		}
		if err := end.SetSID(endSID, datapath.BehaviorEnd, 0, netip.Addr{}); err != nil {
			t.Fatal(err)
		}
		if err := end.SetSID(endSIDX, datapath.BehaviorEndX, l.eOut, endRecv); err != nil {
			t.Fatal(err)
		}
		// The slow path: the kernel serves the same SIDs for every
		// packet the program hands over untouched.
		for _, args := range endKernelRoutes {
			if _, err := l.e.Run(ctx, "ip", args...); err != nil {
				t.Fatal(err)
			}
		}
		ours = append(ours, l)
	}

	for _, tc := range endCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			frame := srv6.Ether(endMACs.eIn, endMACs.sIf, srv6.EtherTypeIPv6, tc.ip)
			before := make([]drop.Counts, len(ours))
			for i, l := range ours {
				var err error
				if before[i], err = l.end.DropCounts(); err != nil {
					t.Fatal(err)
				}
				l.drain()
				l.drainSender()
			}
			kern.drain()
			kern.drainSender()
			if err := kern.send(frame); err != nil {
				t.Fatal(err)
			}
			for _, l := range ours {
				if err := l.send(frame); err != nil {
					t.Fatal(err)
				}
			}
			deadline := time.Now().Add(endTimeout)
			gotK := kern.receive(deadline)
			// Errors the endpoints sent are queued at the senders by
			// now (the receivers were waited for); wait a little
			// more only where one is expected.
			icmpDeadline := time.Now()
			if tc.icmp {
				icmpDeadline = icmpDeadline.Add(300 * time.Millisecond)
			}
			icmpK := kern.receiveICMP(icmpDeadline, tc.icmp)
			if tc.icmp && len(icmpK) != 1 {
				t.Errorf("kernel: %d ICMPv6 errors at the sender, want 1", len(icmpK))
			}
			for i, l := range ours {
				gotB := l.receive(deadline)
				icmpB := l.receiveICMP(icmpDeadline, tc.icmp)
				after, err := l.end.DropCounts()
				if err != nil {
					t.Fatal(err)
				}
				l.check(t, tc, gotK, gotB, before[i], after)
				l.checkICMP(t, tc, icmpK, icmpB)
			}
		})
	}
	for _, l := range ours {
		fib, err := l.end.FIBCounts()
		if err != nil {
			t.Fatal(err)
		}
		sids, err := l.end.SIDCounts()
		if err != nil {
			t.Fatal(err)
		}
		runs := func(p *cebpf.Program) uint64 {
			st, err := p.Stats()
			if err != nil {
				return 0
			}
			return st.RunCount
		}
		tcRuns, xdpRuns := runs(l.end.Program()), runs(l.end.XDPProgram())
		t.Logf("srchain %s: End %+v, End.X %+v, fib %v, runs tc %d xdp %d", l.name, sids[endSID], sids[endSIDX], fib, tcRuns, xdpRuns)
		if l.name == "tc+xdp" && xdpRuns != 0 && tcRuns >= xdpRuns {
			t.Errorf("%s: tc ran %d times, xdp %d: the XDP twin should take most packets", l.name, tcRuns, xdpRuns)
		}
		// The program forwards the common cases itself; the rest of
		// what arrived went through the kernel's End.
		if n := fib["success"] + fib["redirect-neigh"]; n == 0 || n > uint64(l.forwarded) {
			t.Errorf("%s: fib successes %v, want 1..%d forwarded by the program", l.name, fib, l.forwarded)
		}
	}
}

// check compares what one srchain line delivered (gotB) with the kernel
// line (gotK) and its drop counters with the case's reason.
func (l *oursLine) check(t *testing.T, tc endCase, gotK, gotB [][]byte, before, after drop.Counts) {
	t.Helper()
	if len(gotK) != len(gotB) {
		t.Errorf("%s: kernel delivered %d frames, srchain %d", l.name, len(gotK), len(gotB))
		return
	}
	for i := range gotK {
		if !bytes.Equal(gotK[i], gotB[i]) {
			t.Errorf("%s: frame %d differs\nkernel  %x\nsrchain %x", l.name, i, gotK[i], gotB[i])
		}
	}
	for r := range after {
		d := after[r] - before[r]
		want := uint64(0)
		if drop.Reason(r) == tc.reason && tc.reason != drop.None {
			want = 1
		}
		if d != want {
			t.Errorf("%s: drop counter %s += %d, want %d", l.name, drop.Reason(r), d, want)
		}
	}
	switch {
	case tc.passes:
	case tc.icmp:
		if len(gotK) != 0 {
			t.Errorf("%s: hop limit exhausted, but %d frames reached the receiver", l.name, len(gotK))
		}
	case tc.reason != drop.None:
		if len(gotK) != 0 {
			t.Errorf("%s: malformed packet forwarded by both", l.name)
		}
	default:
		if len(gotK) != 1 {
			t.Errorf("%s: valid packet: %d frames arrived, want 1", l.name, len(gotK))
			return
		}
		l.forwarded++
		if tc.noRef {
			return
		}
		// And both equal the codec's reference End.
		ip := tc.ip
		if n := 40 + int(binary.BigEndian.Uint16(ip[4:6])); n < len(ip) {
			ip = ip[:n]
		}
		ref, err := srv6.MutateEnd(ip)
		if err != nil {
			t.Fatalf("srv6.MutateEnd: %v", err)
		}
		want := srv6.Ether(endMACs.rIf, endMACs.eOut, srv6.EtherTypeIPv6, ref)
		if !bytes.Equal(gotB[0], want) {
			t.Errorf("%s: frame differs from srv6.MutateEnd\n got %x\nwant %x", l.name, gotB[0], want)
		}
	}
}

// checkICMP compares the ICMPv6 errors the sender got back from an
// srchain line with the kernel line's.
func (l *oursLine) checkICMP(t *testing.T, tc endCase, icmpK, icmpB [][]byte) {
	t.Helper()
	if len(icmpK) != len(icmpB) {
		t.Errorf("%s: kernel line sent %d ICMPv6 errors to the sender, srchain %d", l.name, len(icmpK), len(icmpB))
		return
	}
	for i := range icmpK {
		if !bytes.Equal(icmpK[i], icmpB[i]) {
			t.Errorf("%s: ICMPv6 error %d differs\nkernel  %x\nsrchain %x", l.name, i, icmpK[i], icmpB[i])
		}
	}
}
