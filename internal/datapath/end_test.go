package datapath

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"github.com/srchain/srchain/internal/testutil"
	"net"
	"net/netip"
	"os"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"

	"github.com/srchain/srchain/internal/drop"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/srv6"
)

// tc verdicts (linux/pkt_cls.h).
const (
	tcActOK       = 0
	tcActUnspec   = 0xffffffff // TC_ACT_UNSPEC: not a SID, on down the tcx chain
	tcActShot     = 2
	tcActRedirect = 7
)

var (
	sidEnd  = netip.MustParseAddr("fc00:1::1")
	sidEndX = netip.MustParseAddr("fc00:1::2")
	// End.X without a next hop: the new DA is resolved on-link.
	sidEndXOnLink = netip.MustParseAddr("fc00:1::3")
	srcAddr       = netip.MustParseAddr("fc00:a::1")
	// sidArgs is an End SID with 8 ARGS bits: LOC+FUNCT fc00:1::100/120.
	sidArgs = netip.MustParsePrefix("fc00:1::100/120")
	// argsDA is an address in sidArgs, as a policy writes it.
	argsDA  = netip.MustParseAddr("fc00:1::1d5")
	nhAddr  = netip.MustParseAddr("fc00:12::2") // neighbour behind the egress veth
	routed  = netip.MustParseAddr("fc00:2::5")  // next SID with a route via nhAddr
	routed2 = netip.MustParseAddr("fc00:2::6")  // final segment
	noRoute = netip.MustParseAddr("fc00:9::1")  // next SID without a route
	nhMAC   = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x02}
	nhAddr2 = netip.MustParseAddr("fc00:12::3") // next hop of table 100 (fwmark 7)
	nhMAC2  = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x03}
	inMAC   = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xaa} // frames' source MAC
	hostMAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xbb} // the in interface's MAC: frames' destination
)

// xdpCtx is struct xdp_md; test runs may set ingress_ifindex and
// rx_queue_index.
type xdpCtx struct {
	Data, DataEnd, DataMeta, IngressIfindex, RxQueueIndex, EgressIfindex uint32
}

// XDP verdicts (enum xdp_action).
const (
	xdpDrop     = 1
	xdpPass     = 2
	xdpRedirect = 4
)

// testEnv is a namespace with one veth pair: the program "receives" on
// in, the FIB sends fc00:2::/64 via nhAddr out of out (permanent
// neighbour entry, so bpf_fib_lookup succeeds).
type testEnv struct {
	ns      *netns.NS
	end     *End
	in, out int
	outMAC  net.HardwareAddr
}

func requireRoot(t *testing.T) {
	t.Helper()
	testutil.RequireRoot(t)
}

func newTestEnv(t *testing.T) *testEnv {
	t.Helper()
	return newTestEnvWith(t, EndOptions{})
}

// newTestEnvWith is newTestEnv with the End loaded with opts.
func newTestEnvWith(t *testing.T, opts EndOptions) *testEnv {
	t.Helper()
	requireRoot(t)
	name := fmt.Sprintf("srct-e-%d-run", os.Getpid())
	_ = netns.Delete(name)
	ns, err := netns.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ns.Delete(); err != nil {
			t.Error(err)
		}
	})
	nl := ns.Netlink()
	outName, inName := fmt.Sprintf("srcte%do", os.Getpid()), fmt.Sprintf("srcte%di", os.Getpid())
	if err := nl.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: outName}, PeerName: inName, PeerHardwareAddr: hostMAC}); err != nil {
		t.Fatalf("add veth: %v", err)
	}
	env := &testEnv{ns: ns}
	for _, n := range []string{outName, inName} {
		l, err := nl.LinkByName(n)
		if err != nil {
			t.Fatal(err)
		}
		if err := nl.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
		if n == outName {
			env.out, env.outMAC = l.Attrs().Index, l.Attrs().HardwareAddr
		} else {
			env.in = l.Attrs().Index
		}
	}
	if err := ns.Sysctl("net.ipv6.conf.all.forwarding", "1"); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{
		{"ip", "-6", "addr", "add", "fc00:12::1/64", "dev", outName, "nodad"},
		{"ip", "-6", "neigh", "replace", nhAddr.String(), "lladdr", nhMAC.String(), "dev", outName, "nud", "permanent"},
		{"ip", "-6", "route", "add", "fc00:2::/64", "via", nhAddr.String(), "dev", outName},
		// Policy routing: mark 7 uses table 100, via nhAddr2.
		{"ip", "-6", "neigh", "replace", nhAddr2.String(), "lladdr", nhMAC2.String(), "dev", outName, "nud", "permanent"},
		{"ip", "-6", "route", "add", "fc00:2::/64", "via", nhAddr2.String(), "dev", outName, "table", "100"},
		{"ip", "-6", "rule", "add", "fwmark", "7", "lookup", "100"},
	} {
		if _, err := ns.Run(t.Context(), cmd[0], cmd[1:]...); err != nil {
			t.Fatal(err)
		}
	}
	e, err := LoadEnd(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	env.end = e
	// What AttachXDP records (the program is test-run, not attached).
	var mac endXdpProgIfMac
	copy(mac.Addr[:], hostMAC)
	if err := e.xdp.IfMacs.Update(uint32(env.in), mac, ebpf.UpdateAny); err != nil {
		t.Fatal(err)
	}
	if err := e.SetSID(sidEnd, BehaviorEnd, 0, netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	if err := e.SetSID(sidEndX, BehaviorEndX, env.out, nhAddr); err != nil {
		t.Fatal(err)
	}
	if err := e.SetSID(sidEndXOnLink, BehaviorEndX, env.out, netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	if err := e.SetSIDPrefix(sidArgs, BehaviorEnd, 0, netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	return env
}

// run feeds frame to the program as if received on env.in.
func (env *testEnv) run(t *testing.T, frame []byte, xdp bool) (uint32, []byte) {
	t.Helper()
	return env.runMark(t, frame, xdp, 0)
}

// runMark is run with skb->mark set (tc only).
func (env *testEnv) runMark(t *testing.T, frame []byte, xdp bool, mark uint32) (uint32, []byte) {
	t.Helper()
	out := make([]byte, len(frame)+256)
	opts := &ebpf.RunOptions{
		Data:    frame,
		DataOut: out,
		Context: testutil.SKB{Mark: mark, IngressIfindex: uint32(env.in), Ifindex: uint32(env.in)},
	}
	prog := env.end.Program()
	if xdp {
		prog = env.end.XDPProgram()
		// data_end must equal the frame length (bpf_prog_test_run_xdp).
		opts.Context = xdpCtx{DataEnd: uint32(len(frame)), IngressIfindex: uint32(env.in)}
	}
	var ret uint32
	err := env.ns.Do(func() error {
		var err error
		ret, err = prog.Run(opts)
		return err
	})
	if err != nil {
		t.Fatalf("test run: %v", err)
	}
	return ret, opts.DataOut
}

func ether(ip []byte) []byte {
	return srv6.Ether(hostMAC, inMAC, srv6.EtherTypeIPv6, ip)
}

// srv6Pkt is an IPv6 packet from srcAddr to dst carrying s (written as
// is, so s may be malformed) and a UDP payload, with hop limit hl.
func srv6Pkt(t *testing.T, dst netip.Addr, hl uint8, s srv6.SRH) []byte {
	t.Helper()
	inner := srv6.UDP6(srcAddr, routed2, 1000, 2000, []byte("srchain end test"))
	srh, err := s.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	h := srv6.IPv6{HopLimit: hl, NextHeader: srv6.ProtoRouting, Src: srcAddr, Dst: dst, PayloadLen: uint16(len(srh) + len(inner))}
	return append(append(h.AppendTo(nil), srh...), inner...)
}

// srhFor is a valid SRH for travel (first SID first).
func srhFor(travel ...netip.Addr) srv6.SRH { return srv6.NewSRH(srv6.ProtoIPv6, travel) }

// withSRH returns s after fn changed it.
func withSRH(s srv6.SRH, fn func(*srv6.SRH)) srv6.SRH { fn(&s); return s }

func addrs(n int) []netip.Addr {
	out := []netip.Addr{sidEnd}
	for i := 1; i < n; i++ {
		out = append(out, netip.AddrFrom16([16]byte{0xfc, 0, 0, 2, 14: byte(i >> 8), 15: byte(i)}))
	}
	return out
}

// withHBH puts an 8-byte Hop-by-Hop header (PadN) in front of the SRH.
func withHBH(pkt []byte) []byte {
	out := append([]byte(nil), pkt[:40]...)
	out[6] = srv6.ProtoHopByHop
	binary.BigEndian.PutUint16(out[4:6], binary.BigEndian.Uint16(pkt[4:6])+8)
	out = append(out, srv6.ProtoRouting, 0, 1, 4, 0, 0, 0, 0)
	return append(out, pkt[40:]...)
}

func setByte(pkt []byte, off int, v byte) []byte {
	out := append([]byte(nil), pkt...)
	out[off] = v
	return out
}

type tcase struct {
	name   string
	ip     []byte // IPv6 (or IPv4) packet; framed with ether()
	frame  []byte // raw frame instead of ip
	want   uint32
	reason drop.Reason
	// expect: "untouched", "redirect" (MACs from the FIB + MutateEnd),
	// "stack" (MutateEnd with the hop limit left to the kernel),
	// "neigh" (MutateEnd, MACs left to bpf_redirect_neigh), "" (dropped).
	expect string
	model  []byte // packet fed to srv6.MutateEnd when it differs from ip
	// modelReason is what srv6.Reason(MutateEnd) says when it names
	// the defect differently (both drop); zero means reason.
	modelReason drop.Reason
	custom      []byte // expected output for expect == "custom"
	// modelForwards: srv6.MutateEnd accepts what the program drops.
	modelForwards bool
	// xdpPass: the XDP twin passes the packet untouched to tc although
	// tc redirects it (it writes only packets it redirects itself).
	xdpPass bool
	// mark is the skb mark of the test run (tc only).
	mark uint32
	// dmac overrides the next hop MAC of "redirect".
	dmac net.HardwareAddr
	// fib names the fib_counters slot that must move by one ("" any).
	fib string
	// pass names the reason the tc program hands the packet untouched
	// to the kernel's seg6local End (pass_counters); implies "untouched"
	// and TC_ACT_OK / XDP_PASS.
	pass string
}

// endTestCases is the table shared by the tc and XDP test runs.
func endTestCases(t *testing.T, env *testEnv) []tcase {
	valid := srv6Pkt(t, sidEnd, 64, srhFor(sidEnd, routed, routed2))
	tlvs := srv6Pkt(t, sidEnd, 64, withSRH(srhFor(sidEnd, routed, routed2), func(s *srv6.SRH) {
		s.TLVs = []srv6.TLV{{Type: 0x80, Value: []byte{1, 2, 3, 4}}, {Type: srv6.TLVPad1}, {Type: srv6.TLVPadN, Value: []byte{0}}}
	}))
	badTLV := setByte(tlvs, 40+8+48+1, 200) // first TLV's length runs past the SRH
	srhOff := 40
	hmacPkt := srv6Pkt(t, sidEnd, 64, withSRH(srhFor(sidEnd, routed, routed2), func(s *srv6.SRH) {
		s.TLVs = []srv6.TLV{srv6.HMACTLV{KeyID: 9, HMAC: bytes.Repeat([]byte{0xcd}, 32)}.TLV()}
	}))
	// RFC 8986 4.1 S06 allows SL = last entry + 1 (the active SID only in
	// the DA, as in a reduced SRH): End goes to segment[last entry].
	// srv6.MutateEnd rejects it, so the expected bytes are written here.
	reducedPkt := srv6Pkt(t, sidEnd, 64, srv6.SRH{NextHeader: srv6.ProtoIPv6, RoutingType: 4, SegmentsLeft: 2, LastEntry: 1, Segments: []netip.Addr{routed2, routed}})
	reducedIP := setByte(setByte(reducedPkt, srhOff+srv6.SRHOffSegmentsLeft, 1), 7, 63)
	r16 := routed.As16()
	copy(reducedIP[24:40], r16[:])
	reducedWant := srv6.Ether(nhMAC, env.outMAC, srv6.EtherTypeIPv6, reducedIP)
	hl1 := srv6Pkt(t, sidEnd, 1, srhFor(sidEnd, routed))
	hl0 := srv6Pkt(t, sidEnd, 0, srhFor(sidEnd, routed))
	big := srv6Pkt(t, sidEndX, 64, withSRH(srhFor(sidEndX, noRoute), func(s *srv6.SRH) {
		s.TLVs = []srv6.TLV{{Type: srv6.TLVPadN, Value: make([]byte, 6)}}
	}))
	big = fixPlen(append(big, make([]byte, 1600)...))

	return []tcase{
		{name: "end SL 2->1 redirect", ip: valid, want: tcActRedirect, expect: "redirect"},
		{name: "end SL 1->0", ip: srv6Pkt(t, sidEnd, 64, withSRH(srhFor(routed, sidEnd, routed2), func(s *srv6.SRH) { s.SegmentsLeft = 1 })), want: tcActRedirect, expect: "redirect"},
		{name: "end with TLVs", ip: tlvs, want: tcActRedirect, expect: "redirect"},
		{name: "end hop limit 2", ip: srv6Pkt(t, sidEnd, 2, srhFor(sidEnd, routed)), want: tcActRedirect, expect: "redirect"},
		{name: "end 16 segments", ip: srv6Pkt(t, sidEnd, 64, srhFor(append(addrs(15), routed)...)), want: tcActRedirect, expect: "redirect"},
		// Issue 8: a SID with ARGS bits is matched on LOC+FUNCT (the
		// map holds it masked); the exact lookup used to miss it.
		{name: "end sid with ARGS", ip: srv6Pkt(t, argsDA, 64, srhFor(argsDA, routed, routed2)), want: tcActRedirect, expect: "redirect"},
		{name: "outside the ARGS sid", ip: srv6Pkt(t, netip.MustParseAddr("fc00:1::2d5"), 64, srhFor(netip.MustParseAddr("fc00:1::2d5"), routed)), want: tcActUnspec, expect: "untouched"},
		{name: "end behind destination options", ip: withDestOpt(valid), want: tcActRedirect, expect: "redirect"},
		{name: "end behind hop-by-hop -> kernel", ip: withHBH(valid), pass: "hop-by-hop"},
		{name: "end no route -> kernel", ip: srv6Pkt(t, sidEnd, 64, srhFor(sidEnd, noRoute)), pass: "fib", fib: "not-forwarded"},
		{name: "next SID a local address -> kernel", ip: srv6Pkt(t, sidEnd, 64, srhFor(sidEnd, netip.MustParseAddr("fc00:12::1"))), pass: "fib", fib: "not-forwarded"},
		{name: "next SID ::1 -> kernel", ip: srv6Pkt(t, sidEnd, 64, srhFor(sidEnd, netip.IPv6Loopback())), pass: "next-special"},
		// fwmark 7 selects table 100 (route via nhAddr2): the lookup
		// must use skb->mark.
		{name: "end mark 7 -> policy route", ip: valid, mark: 7, want: tcActRedirect, expect: "redirect", dmac: nhMAC2},
		{name: "end.x too big -> kernel", ip: big, pass: "mtu", fib: "mtu"},
		{name: "end.x on-link", ip: srv6Pkt(t, sidEndXOnLink, 64, srhFor(sidEndXOnLink, noRoute)), want: tcActRedirect, expect: "neigh"},
		{name: "end.x", ip: srv6Pkt(t, sidEndX, 64, srhFor(sidEndX, noRoute, routed2)), want: tcActRedirect, expect: "neigh"},
		{name: "trailing bytes -> kernel", ip: append(append([]byte(nil), valid...), 0xde, 0xad, 0xbe, 0xef), pass: "trailing-bytes"},
		{name: "next SID local -> kernel", ip: srv6Pkt(t, sidEnd, 64, srhFor(sidEnd, sidEndX, routed2)), pass: "next-local"},
		{name: "next SID local, hop limit 1 -> kernel", ip: srv6Pkt(t, sidEnd, 1, srhFor(sidEnd, sidEndX, routed2)), pass: "hop-limit"},
		{name: "SL = last entry + 1", ip: reducedPkt, want: tcActRedirect, expect: "custom", custom: reducedWant},
		{name: "not a sid", ip: srv6Pkt(t, routed, 64, srhFor(routed, routed2)), want: tcActUnspec, expect: "untouched"},
		{name: "plain ipv6 not a sid", ip: srv6.UDP6(srcAddr, routed, 1, 2, []byte("x")), want: tcActUnspec, expect: "untouched"},
		{name: "ipv4", frame: srv6.Ether(nhMAC, inMAC, srv6.EtherTypeIPv4, srv6.UDP4(netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), 1, 2, []byte("x"))), want: tcActUnspec, expect: "untouched"},
		{name: "arp", frame: srv6.Ether(nhMAC, inMAC, 0x0806, make([]byte, 28)), want: tcActUnspec, expect: "untouched"},
		// A frame shorter than an IPv6 header cannot be test-run (the
		// kernel refuses it); test/e2e sends one through both datapaths.
		{name: "frame for another host -> kernel", frame: srv6.Ether(nhMAC, inMAC, srv6.EtherTypeIPv6, valid), pass: "not-host"},
		{name: "broadcast frame -> kernel", frame: srv6.Ether(net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, inMAC, srv6.EtherTypeIPv6, valid), pass: "not-host"},
		{name: "source :: -> kernel", ip: withSrc(valid, netip.IPv6Unspecified()), pass: "source"},
		{name: "source link-local -> kernel", ip: withSrc(valid, netip.MustParseAddr("fe80::1")), pass: "source"},
		{name: "source multicast -> kernel", ip: withSrc(valid, netip.MustParseAddr("ff02::1")), pass: "source"},
		{name: "source v4-mapped -> kernel", ip: withSrc(valid, netip.MustParseAddr("::ffff:10.0.0.1")), pass: "source"},

		{name: "payload length past end -> kernel", ip: valid[:len(valid)-10], pass: "ipv6-header"},
		{name: "payload length zero (jumbo) -> kernel", ip: fixPlenTo(valid, 0), pass: "ipv6-header"},
		{name: "ip version not 6 -> kernel", ip: setByte(valid, 0, 0x40), pass: "ipv6-header"},
		{name: "no srh -> kernel", ip: srv6.UDP6(srcAddr, sidEnd, 1, 2, []byte("x")), pass: "ext-order"},
		{name: "hop-by-hop truncated -> kernel", ip: setByte(srv6.UDP6(srcAddr, sidEnd, 1, 2, nil)[:40], 6, srv6.ProtoHopByHop)[:40], pass: "ipv6-header"},
		{name: "srh fixed part truncated", ip: fixPlen(valid[:44]), want: tcActShot, reason: drop.SRHTruncated},
		{name: "wrong routing type", ip: setByte(valid, srhOff+srv6.SRHOffRoutingType, 2), want: tcActShot, reason: drop.SRHBadType},
		{name: "hdr ext len too small", ip: setByte(valid, srhOff+srv6.SRHOffHdrExtLen, 4), want: tcActShot, reason: drop.SRHBadLen},
		{name: "hdr ext len past packet", ip: setByte(valid, srhOff+srv6.SRHOffHdrExtLen, 200), want: tcActShot, reason: drop.SRHTruncated},
		{name: "last entry over hdr len", ip: setByte(valid, srhOff+srv6.SRHOffLastEntry, 5), want: tcActShot, reason: drop.SRHBadLen},
		{name: "SL over last entry + 1", ip: setByte(valid, srhOff+srv6.SRHOffSegmentsLeft, 4), want: tcActShot, reason: drop.SRHSLOverLast},
		{name: "17 segments -> kernel", ip: srv6Pkt(t, sidEnd, 64, srhFor(append(addrs(16), routed)...)), pass: "limits"},
		{name: "SL zero -> kernel", ip: setByte(valid, srhOff+srv6.SRHOffSegmentsLeft, 0), pass: "ext-order"},
		{name: "hop limit 1 -> kernel", ip: hl1, pass: "hop-limit"},
		{name: "hop limit 0 -> kernel", ip: hl0, pass: "hop-limit"},
		{name: "end.x hop limit 1 -> kernel", ip: setByte(srv6Pkt(t, sidEndX, 64, srhFor(sidEndX, noRoute)), 7, 1), pass: "hop-limit"},
		{name: "bad tlv length", ip: badTLV, want: tcActShot, reason: drop.TLVBad},
		// The kernel verifies H-flagged HMAC TLVs (with its keys): its
		// business when the SRH comes first.
		{name: "H flag with HMAC TLV -> kernel", ip: setByte(hmacPkt, srhOff+srv6.SRHOffFlags, 0x08), pass: "hmac"},
		// Behind a Destination Options header the kernel's HMAC check
		// reads the wrong header (docs/datapath.md); srchain drops.
		{name: "H flag with HMAC TLV behind destination options", ip: withDestOpt(setByte(hmacPkt, srhOff+srv6.SRHOffFlags, 0x08)), want: tcActShot, reason: drop.Unsupported, modelForwards: true},
		{name: "HMAC TLV without H flag", ip: hmacPkt, want: tcActRedirect, expect: "redirect"},
	}
}

// withDestOpt puts an 8-byte Destination Options header (PadN) in front
// of the SRH.
func withDestOpt(pkt []byte) []byte {
	out := withHBH(pkt)
	out[6] = srv6.ProtoDestOpts
	return out
}

// withSrc replaces the source address.
func withSrc(pkt []byte, src netip.Addr) []byte {
	out := append([]byte(nil), pkt...)
	a := src.As16()
	copy(out[8:24], a[:])
	return out
}

func TestEndTestRun(t *testing.T) {
	env := newTestEnv(t)
	for _, tc := range endTestCases(t, env) {
		t.Run(tc.name, func(t *testing.T) { env.check(t, tc, false) })
	}
	counts, err := env.end.SIDCounts()
	if err != nil {
		t.Fatal(err)
	}
	if c := counts[sidEndX]; c.Packets != 3 {
		t.Errorf("End.X sid counter %d packets, want 3", c.Packets)
	}
	if c := counts[sidEnd]; c.Packets < 20 {
		t.Errorf("End sid counter %d packets, want >= 20", c.Packets)
	}
	fib, err := env.end.FIBCounts()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fib outcomes: %v", fib)
	if fib["success"] == 0 || fib["redirect-neigh"] != 2 {
		t.Errorf("fib counters %v: want successes and two redirect-neigh", fib)
	}
}

// fixPlen rewrites the IPv6 payload length to match the slice.
func fixPlen(pkt []byte) []byte {
	out := append([]byte(nil), pkt...)
	binary.BigEndian.PutUint16(out[4:6], uint16(len(out)-40))
	return out
}

// fixPlenTo sets the IPv6 payload length to n.
func fixPlenTo(pkt []byte, n uint16) []byte {
	out := append([]byte(nil), pkt...)
	binary.BigEndian.PutUint16(out[4:6], n)
	return out
}

// check runs one case through the tc program, or the XDP twin, whose
// verdicts map from tc's: OK and UNSPEC -> PASS, SHOT -> DROP, REDIRECT -> REDIRECT,
// except End.X, which XDP passes untouched to tc.
func (env *testEnv) check(t *testing.T, tc tcase, xdp bool) {
	t.Helper()
	if xdp {
		// XDP writes only what it redirects: everything it passes on
		// to tc is untouched, and it has no mark.
		switch {
		case tc.pass != "":
			tc.pass = "" // passed on to tc untouched, counted there
			tc.want, tc.expect = xdpPass, "untouched"
		case tc.expect == "neigh", tc.want == tcActOK, tc.want == tcActUnspec, tc.xdpPass:
			tc.want, tc.expect = xdpPass, "untouched"
		case tc.want == tcActShot:
			tc.want = xdpDrop
		case tc.want == tcActRedirect:
			tc.want = xdpRedirect
		}
		tc.fib, tc.mark, tc.dmac = "", 0, nil
	}
	if tc.pass != "" {
		tc.want, tc.expect = tcActOK, "untouched"
	}
	frame := tc.frame
	if frame == nil {
		frame = ether(tc.ip)
	}
	passBefore, err := env.end.PassCounts()
	if err != nil {
		t.Fatal(err)
	}
	before, err := env.end.DropCounts()
	if err != nil {
		t.Fatal(err)
	}
	fibBefore, err := env.end.FIBCounts()
	if err != nil {
		t.Fatal(err)
	}
	sidBefore, err := env.end.SIDCounts()
	if err != nil {
		t.Fatal(err)
	}
	ret, out := env.runMark(t, frame, xdp, tc.mark)
	after, err := env.end.DropCounts()
	if err != nil {
		t.Fatal(err)
	}
	sidAfter, err := env.end.SIDCounts()
	if err != nil {
		t.Fatal(err)
	}
	// SID counters count IP bytes (no Ethernet header), as the kernel's
	// seg6local counters and ip6tables do.
	for sid, c := range sidAfter {
		b := sidBefore[sid]
		if dp, db := c.Packets-b.Packets, c.Bytes-b.Bytes; dp > 1 || db != dp*uint64(len(frame)-14) {
			t.Errorf("sid %s counter += %d packets %d bytes, want at most 1 packet of %d IP bytes", sid, dp, db, len(frame)-14)
		}
	}
	if ret != tc.want {
		t.Fatalf("verdict %d, want %d", ret, tc.want)
	}
	passAfter, err := env.end.PassCounts()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range passReasons {
		d := passAfter[r] - passBefore[r]
		if want := uint64(0); r == tc.pass {
			want = 1
			if d != want {
				t.Errorf("pass counter %s += %d, want %d", r, d, want)
			}
		} else if d != 0 {
			t.Errorf("pass counter %s += %d, want 0", r, d)
		}
	}
	if tc.fib != "" {
		fibAfter, err := env.end.FIBCounts()
		if err != nil {
			t.Fatal(err)
		}
		if d := fibAfter[tc.fib] - fibBefore[tc.fib]; d != 1 {
			t.Errorf("fib counter %s += %d, want 1 (%v)", tc.fib, d, fibAfter)
		}
	}
	for r := range after {
		d := after[r] - before[r]
		switch {
		case drop.Reason(r) == tc.reason && tc.reason != drop.None && d != 1:
			t.Errorf("drop counter %s += %d, want 1", drop.Reason(r), d)
		case drop.Reason(r) != tc.reason && d != 0:
			t.Errorf("drop counter %s += %d, want 0", drop.Reason(r), d)
		}
	}
	if tc.expect == "untouched" {
		if !bytes.Equal(out[:len(frame)], frame) || len(out) != len(frame) {
			t.Errorf("output differs from the input\n got %x\nwant %x", out, frame)
		}
		return
	}
	model := tc.model
	if model == nil {
		model = tc.ip
	}
	ref, refErr := srv6.MutateEnd(model)
	if tc.reason != drop.None && tc.modelForwards {
		if refErr != nil {
			t.Errorf("srv6.MutateEnd: %v, expected it to accept the packet", refErr)
		}
		return
	}
	if tc.reason != drop.None {
		// The reference model must agree on why it is dropped.
		wantModel := tc.reason
		if tc.modelReason != drop.None {
			wantModel = tc.modelReason
		}
		if got := srv6.Reason(refErr); got != wantModel {
			t.Errorf("srv6.MutateEnd says %s (%v), program says %s", got, refErr, tc.reason)
		}
		return
	}
	var want []byte
	switch tc.expect {
	case "untouched":
		want = frame
	case "custom":
		want = tc.custom
	case "redirect", "stack", "neigh", "loop":
		if refErr != nil {
			t.Fatalf("srv6.MutateEnd: %v", refErr)
		}
		switch tc.expect {
		case "redirect":
			dmac := nhMAC
			if tc.dmac != nil {
				dmac = tc.dmac
			}
			want = srv6.Ether(dmac, env.outMAC, srv6.EtherTypeIPv6, ref)
		case "stack", "loop":
			// Stack: the kernel's ip6_forward decrements it; loop:
			// the next pass through the program does.
			ref[7]++
			want = ether(ref)
		case "neigh":
			want = ether(ref)
		}
	}
	if !bytes.Equal(out, want) {
		t.Errorf("output differs\n got %x\nwant %x", out, want)
	}
}

func TestEndXDPTestRun(t *testing.T) {
	env := newTestEnv(t)
	for _, tc := range endTestCases(t, env) {
		t.Run(tc.name, func(t *testing.T) { env.check(t, tc, true) })
	}
}
