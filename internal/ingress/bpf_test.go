package ingress

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/srchain/srchain/internal/bpfrt"
	"github.com/srchain/srchain/internal/datapath"
	"github.com/srchain/srchain/internal/drop"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/srv6"
	"github.com/srchain/srchain/internal/state"
	"github.com/srchain/srchain/internal/testutil"
)

const (
	tcActUnspec = 0xffffffff // TC_ACT_UNSPEC (-1)
	tcActOK     = 0
	xdpPass     = 2
)

var (
	// BPF_PROG_TEST_RUN runs tc programs on the loopback device: a frame
	// to its (all-zero) MAC address is PACKET_HOST.
	hostMAC  = net.HardwareAddr{0, 0, 0, 0, 0, 0}
	otherMAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xaa}
	srcMAC   = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xbb}
	tunsrc   = netip.MustParseAddr("fc00:a2::1")
)

func mp(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func ma(s string) netip.Addr   { return netip.MustParseAddr(s) }

func frame(dst net.HardwareAddr, l3 []byte) []byte {
	et := uint16(srv6.EtherTypeIPv6)
	if l3[0]>>4 == 4 {
		et = srv6.EtherTypeIPv4
	}
	return srv6.Ether(dst, srcMAC, et, l3)
}

// testNS runs the test's program runs in a fresh namespace holding the
// kernel's policy for the chains of cfgs (policyFor: what srchain
// installs beside the program, so the program's FIB check finds each
// chain's seg6 route), forwarding on, and no route to any segment: the
// lookup of the first segment fails and tc hands the rewritten packet
// to the stack (TC_ACT_OK); XDP passes it untouched.
func testNS(t *testing.T, cfgs ...Config) *netns.NS {
	t.Helper()
	ns, err := netns.Create(fmt.Sprintf("srchain-ingt-%d", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Delete() })
	for _, cfg := range cfgs {
		policyFor(t, ns, cfg)
	}
	return ns
}

// policyFor installs the kernel's steering of cfg's chains as the
// compiler emits it (a 5-tuple chain: an ip rule at 1000 + i into table
// 1000 + i holding its seg6 routes; a destination chain: seg6 routes in
// the main table), on lo, where BPF_PROG_TEST_RUN runs tc programs, and
// a route back to the test's IPv4 sources through lo (the IPv4 source
// check).
func policyFor(t *testing.T, ns *netns.NS, cfg Config) {
	t.Helper()
	ip := func(args ...string) {
		t.Helper()
		if out, err := ns.Run(t.Context(), "ip", args...); err != nil {
			t.Fatalf("ip %v: %v %s", args, err, out)
		}
	}
	for _, k := range []string{"net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding", "net.ipv6.conf.lo.forwarding"} {
		if err := ns.Sysctl(k, "1"); err != nil {
			t.Fatal(err)
		}
	}
	ip("link", "set", "lo", "up")
	ip("-4", "route", "replace", "10.0.0.0/8", "dev", "lo")
	for _, args := range KernelPolicy(cfg.Chains, "lo") {
		ip(args...)
	}
}

func loadTest(t *testing.T, cfg Config, s Settings) *Ingress {
	t.Helper()
	testutil.RequireRoot(t)
	in, err := Load(Options{XDP: true, Capacity: CapacityFor(len(cfg.Chains))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	if _, err := in.Update(cfg, s); err != nil {
		t.Fatal(err)
	}
	return in
}

func run(t *testing.T, ns *netns.NS, prog *ebpf.Program, in []byte) (uint32, []byte) {
	t.Helper()
	opts := &ebpf.RunOptions{Data: in, DataOut: make([]byte, len(in)+1024)}
	if prog.Type() == ebpf.SchedCLS {
		// Arrived on lo (ifindex 1), where policyFor put the policy.
		opts.Context = testutil.SKB{IngressIfindex: 1, Ifindex: 1}
	}
	var ret uint32
	if err := ns.Do(func() (err error) { ret, err = prog.Run(opts); return err }); err != nil {
		t.Fatalf("test run: %v", err)
	}
	return ret, opts.DataOut
}

var (
	segsA = []netip.Addr{ma("fc00:2::1"), ma("fc00:3::d6")}
	segsB = []netip.Addr{ma("fc00:2::2"), ma("fc00:4::2"), ma("fc00:3::d4")}
	segsI = []netip.Addr{ma("fc00:2::1"), ma("fc00:4::1")}
	// Chains in spec order: a 5-tuple chain (udp 53 to 2001:db8:5::/48),
	// a destination chain for the /64 inside it (longer prefix, but the
	// 5-tuple rule comes first, as the kernel's ip rule), an IPv4 chain,
	// an insert chain.
	testCfg = Config{Chains: []Chain{
		{Name: "dns", Mode: state.ModeEncap, Segments: segsB, Dev: "eth1", Dst: []netip.Prefix{mp("2001:db8:5::/48")}, Proto: 17, DPort: state.PortRange{From: 53, To: 53}},
		{Name: "web6", Mode: state.ModeEncap, Segments: segsA, Dev: "eth1", Dst: []netip.Prefix{mp("2001:db8:5::/64")}},
		{Name: "v4", Mode: state.ModeEncap, Segments: segsB, Dev: "eth1", Dst: []netip.Prefix{mp("10.5.0.0/16")}},
		{Name: "ins", Mode: state.ModeInsert, Segments: segsI, Dev: "eth1", Dst: []netip.Prefix{mp("2001:db8:7::/64")}},
	}}
	testSettings = Settings{TunSrc: tunsrc, HopLimit4: map[string]uint8{"eth1": 61}}
)

// TestBPFClassifyEncap: the tc program classifies by the chains' rules
// (5-tuple first, then longest prefix) and writes the kernel's H.Encaps
// / H.Insert (outer fields inherited from an IPv6 packet, hop limit of
// the route device for IPv4, trailing bytes trimmed); packets of no
// chain, to other hosts or to multicast pass untouched; XDP, whose FIB
// lookup fails here, passes everything untouched to tc.
func TestBPFClassifyEncap(t *testing.T) {
	in := loadTest(t, testCfg, testSettings)
	ns := testNS(t, testCfg)
	s6, d6 := ma("2001:db8:1::1"), ma("2001:db8:5::9")
	udp53 := srv6.UDP6(s6, d6, 4000, 53, []byte("query"))
	udp80 := srv6.UDP6(s6, d6, 4000, 80, []byte("web"))
	udp80[1] |= 0x0a // traffic class / flow label bits
	udp80[2], udp80[3] = 0xbc, 0xde
	udp80[7] = 33
	v4 := srv6.UDP4(ma("10.1.0.1"), ma("10.5.0.7"), 1, 2, []byte("x"))
	ins := srv6.TCP6(s6, ma("2001:db8:7::3"), 1000, 22, 0x10, nil)
	inherit := srv6.EncapOptions{Inherit: true}
	mustEncap := func(o srv6.EncapOptions, segs []netip.Addr, inner []byte) []byte {
		b, err := srv6.EncapWith(o, tunsrc, segs, inner)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	mustInsert := func(segs []netip.Addr, p []byte) []byte {
		b, err := srv6.Insert(p, segs)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	padded := frame(hostMAC, v4)
	padded = append(padded, make([]byte, 60-len(padded))...) // Ethernet minimum
	for _, c := range []struct {
		name  string
		in    []byte
		want  []byte // L3 out; nil: untouched
		chain int
	}{
		{"5-tuple first", frame(hostMAC, udp53), mustEncap(inherit, segsB, udp53), 0},
		{"longest prefix, inherited tc/fl/hl", frame(hostMAC, udp80), mustEncap(inherit, segsA, udp80), 1},
		{"ipv4 padded", padded, mustEncap(srv6.EncapOptions{HopLimit: 61}, segsB, v4), 2},
		{"insert", frame(hostMAC, ins), mustInsert(segsI, ins), 3},
		{"no chain", frame(hostMAC, srv6.UDP6(s6, ma("2001:db8:9::1"), 1, 2, nil)), nil, -1},
		{"other host", frame(otherMAC, udp53), nil, -1},
		{"multicast dst", frame(hostMAC, srv6.UDP6(s6, ma("ff02::1"), 1, 53, nil)), nil, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			before, err := in.ChainCounts(len(testCfg.Chains))
			if err != nil {
				t.Fatal(err)
			}
			ret, out := run(t, ns, in.Program(), c.in)
			if c.want == nil {
				if ret != tcActUnspec || !bytes.Equal(out[:len(c.in)], c.in) {
					t.Fatalf("tc: ret %d, packet changed:\n got %x\nwant %x", int32(ret), out[:len(c.in)], c.in)
				}
			} else {
				if ret != tcActOK {
					t.Fatalf("tc: ret %d, want TC_ACT_OK", int32(ret))
				}
				if got := out[14 : 14+len(c.want)]; !bytes.Equal(got, c.want) {
					t.Fatalf("tc output:\n got %x\nwant %x", got, c.want)
				}
				after, err := in.ChainCounts(len(testCfg.Chains))
				if err != nil {
					t.Fatal(err)
				}
				if after[c.chain].Packets != before[c.chain].Packets+1 {
					t.Errorf("chain %d counter %d -> %d", c.chain, before[c.chain].Packets, after[c.chain].Packets)
				}
			}
			ret, out = run(t, ns, in.XDPProgram(), c.in)
			if ret != xdpPass || !bytes.Equal(out[:len(c.in)], c.in) {
				t.Fatalf("xdp: ret %d, packet changed", ret)
			}
		})
	}
}

// TestBPFUpdateRevert: a new chain set takes effect at once (one
// generation flip), its counters start from zero, and Revert brings the
// previous one back intact.
func TestBPFUpdateRevert(t *testing.T) {
	in := loadTest(t, testCfg, testSettings)
	ns := testNS(t, testCfg)
	p := srv6.UDP6(ma("2001:db8:1::1"), ma("2001:db8:5::9"), 4000, 80, nil)
	f := frame(hostMAC, p)
	outer := func() netip.Addr {
		t.Helper()
		ret, out := run(t, ns, in.Program(), f)
		if ret != tcActOK {
			t.Fatalf("ret %d", int32(ret))
		}
		return netip.AddrFrom16([16]byte(out[14+24 : 14+40]))
	}
	if got := outer(); got != segsA[0] {
		t.Fatalf("before update: DA %v, want %v", got, segsA[0])
	}
	next := Config{Chains: append([]Chain(nil), testCfg.Chains...)}
	next.Chains[1].Segments = segsB
	prev, err := in.Update(next, testSettings)
	if err != nil {
		t.Fatal(err)
	}
	counts, err := in.ChainCounts(len(next.Chains))
	if err != nil || counts[1].Packets != 0 {
		t.Fatalf("counters after update %v, %v", counts, err)
	}
	if got := outer(); got != segsB[0] {
		t.Fatalf("after update: DA %v, want %v", got, segsB[0])
	}
	if h, err := in.Hash(); err != nil || h != Hash(next, testSettings) {
		t.Errorf("hash after update: %x, %v", h, err)
	}
	if err := in.Revert(prev); err != nil {
		t.Fatal(err)
	}
	if got := outer(); got != segsA[0] {
		t.Fatalf("after revert: DA %v, want %v", got, segsA[0])
	}
}

// TestAttachBeforeEnd: on an interface where srchain's End already runs
// (it ends the tcx chain with TC_ACT_OK for packets not to its SIDs),
// the ingress goes right before it, behind a firewall at the head.
func TestAttachBeforeEnd(t *testing.T) {
	in := loadTest(t, testCfg, testSettings)
	ns := testNS(t, testCfg)
	if _, err := ns.Run(t.Context(), "ip", "link", "add", "a0", "type", "veth", "peer", "name", "a1"); err != nil {
		t.Fatal(err)
	}
	l, err := ns.Netlink().LinkByName("a0")
	if err != nil {
		t.Fatal(err)
	}
	idx := l.Attrs().Index
	end, err := datapath.LoadEnd(datapath.EndOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer end.Close()
	var order []string
	err = ns.Do(func() error {
		if err := end.Attach(idx); err != nil {
			return err
		}
		il, err := in.Attach(idx, "")
		if err != nil {
			return err
		}
		defer il.Close()
		order, err = bpfrt.TCXNames(bpfrt.Hook{Ifindex: idx})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{ProgName, "srchain_end"}; !slices.Equal(order, want) {
		t.Fatalf("tcx ingress order %q, want %q", order, want)
	}
}

// TestBPFLeavesToKernel: packets of a chain that the kernel treats in a
// way the fast path does not copy are left untouched to the kernel's own
// path (TC_ACT_UNSPEC, XDP_PASS; outcome "kernel"), where the rules and
// seg6 routes installed beside the program steer them exactly as the
// kernel ingress does (test/e2e TestIngressDifferential compares the
// two): IPv4 options and fragments, IPv6 extension headers, payload
// length 0, unspecified, link-local or IPv4-mapped addresses, martian
// IPv4 sources (the router's own address, a subnet broadcast), and a
// destination the kernel routes otherwise (a more specific plain route,
// a local address).
func TestBPFLeavesToKernel(t *testing.T) {
	in := loadTest(t, testCfg, testSettings)
	ns := testNS(t, testCfg)
	for _, args := range [][]string{
		{"-4", "addr", "add", "10.1.0.254/32", "dev", "lo"},
		{"-4", "addr", "add", "10.2.0.1/24", "dev", "lo"},
		{"-6", "route", "add", "2001:db8:5:0:1::/80", "dev", "lo"},
		{"-6", "addr", "add", "2001:db8:5::fe/128", "dev", "lo", "nodad"},
	} {
		if out, err := ns.Run(t.Context(), "ip", args...); err != nil {
			t.Fatalf("ip %v: %v %s", args, err, out)
		}
	}
	s6, d6 := ma("2001:db8:1::1"), ma("2001:db8:5::9")
	udp80 := srv6.UDP6(s6, d6, 4000, 80, []byte("web"))
	v4 := srv6.UDP4(ma("10.1.0.1"), ma("10.5.0.7"), 1, 2, []byte("x"))
	must := func(p []byte, err error) []byte {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	ext := func(h ...srv6.ExtHdr) []byte { return must(srv6.WithExtHeaders(udp80, h...)) }
	zeroLen := slices.Clone(udp80)
	zeroLen[4], zeroLen[5] = 0, 0
	// Both the fast path's own check and the encapsulation must be
	// reachable: the plain packets are encapsulated (tc: TC_ACT_OK).
	for _, p := range [][]byte{udp80, v4} {
		if ret, _ := run(t, ns, in.Program(), frame(hostMAC, p)); ret != tcActOK {
			t.Fatalf("plain packet %x...: ret %d, want TC_ACT_OK", p[:20], int32(ret))
		}
	}
	for _, c := range []struct {
		name string
		l3   []byte
	}{
		{"ipv4 options (NOP, RR)", must(srv6.WithIPv4Options(v4, []byte{1, 7, 7, 4, 0, 0, 0, 0}))},
		{"ipv4 first fragment", srv6.IPv4Fragment(v4, 0, true)},
		{"ipv4 later fragment", srv6.IPv4Fragment(v4, 3, false)},
		{"ipv4 source: the router's address", srv6.UDP4(ma("10.1.0.254"), ma("10.5.0.7"), 1, 2, nil)},
		{"ipv4 source: a subnet broadcast", srv6.UDP4(ma("10.2.0.255"), ma("10.5.0.7"), 1, 2, nil)},
		{"ipv4 source 0.0.0.0", srv6.UDP4(ma("0.0.0.0"), ma("10.5.0.7"), 1, 2, nil)},
		{"ipv6 atomic fragment", ext(srv6.FragHdr(0, false, 7))},
		{"ipv6 first fragment", ext(srv6.FragHdr(0, true, 7))},
		{"ipv6 AH", ext(srv6.AHHdr(0x100, 1))},
		{"ipv6 hop-by-hop", ext(srv6.OptsHdr(srv6.ExtHopByHop, 0))},
		{"ipv6 destination options", ext(srv6.OptsHdr(srv6.ExtDestOpts, 1))},
		{"ipv6 eight destination options", ext(slices.Repeat([]srv6.ExtHdr{srv6.OptsHdr(srv6.ExtDestOpts, 0)}, 8)...)},
		{"ipv6 SRH, SL > last entry", ext(srv6.RoutingHdr(4, 3, 1, 2))},
		{"ipv6 payload length 0", zeroLen},
		{"ipv6 source ::", srv6.UDP6(ma("::"), d6, 4000, 80, nil)},
		{"ipv6 source link-local", srv6.UDP6(ma("fe80::1"), d6, 4000, 80, nil)},
		{"ipv6 destination IPv4-mapped", srv6.UDP6(s6, ma("::ffff:10.5.0.7"), 4000, 80, nil)},
		{"ipv6 more specific plain route", srv6.UDP6(s6, ma("2001:db8:5:0:1::9"), 4000, 80, nil)},
		{"ipv6 local destination", srv6.UDP6(s6, ma("2001:db8:5::fe"), 4000, 80, nil)},
		{"tcp syn (the kernel path clamps its MSS)", srv6.TCP6(s6, ma("2001:db8:7::3"), 1000, 22, 0x02, nil)},
		{"tcp syn-ack, ipv4", srv6.TCP4(ma("10.1.0.1"), ma("10.5.0.7"), 80, 1000, 0x12, nil)},
		{"insert, source ::", srv6.TCP6(ma("::"), ma("2001:db8:7::3"), 1000, 22, 0x10, nil)},
	} {
		t.Run(c.name, func(t *testing.T) {
			before, err := in.Outcomes()
			if err != nil {
				t.Fatal(err)
			}
			f := frame(hostMAC, c.l3)
			ret, out := run(t, ns, in.Program(), f)
			if ret != tcActUnspec || !bytes.Equal(out[:len(f)], f) {
				t.Fatalf("tc: ret %d, want TC_ACT_UNSPEC and the packet untouched", int32(ret))
			}
			after, err := in.Outcomes()
			if err != nil {
				t.Fatal(err)
			}
			// Left to the kernel on purpose, or not looked at (what the
			// stack refuses outright): untouched either way.
			if b, a := before["kernel"]+before["not-ours"], after["kernel"]+after["not-ours"]; a != b+1 {
				t.Errorf("outcomes kernel + not-ours %d -> %d, want one more", b, a)
			}
			ret, out = run(t, ns, in.XDPProgram(), f)
			if ret != xdpPass || !bytes.Equal(out[:len(f)], f) {
				t.Fatalf("xdp: ret %d, packet changed", ret)
			}
		})
	}
}

// TestBPFTooBig: a packet whose encapsulation would not fit the first
// hop's MTU is answered to its sender, before anything is written, with
// the MTU left for its packets (the route's 1400 less the chain's
// overhead): IPv6 with Packet Too Big from the tunnel source, IPv4 with
// DF with fragmentation needed from the router's address; both counted
// as ing-too-big. IPv4 without DF, which the kernel's encap drops, takes
// the kernel's path untouched.
func TestBPFTooBig(t *testing.T) {
	in := loadTest(t, testCfg, testSettings)
	ns := testNS(t, testCfg)
	for _, args := range [][]string{
		{"-6", "route", "add", "fc00:2::/32", "dev", "lo", "mtu", "lock", "1400"},
		{"-4", "addr", "add", "10.0.0.254/32", "dev", "lo"},
	} {
		if out, err := ns.Run(t.Context(), "ip", args...); err != nil {
			t.Fatalf("ip %v: %v %s", args, err, out)
		}
	}
	const tcActRedirect = 7
	s6, s4 := ma("2001:db8:1::1"), ma("10.1.0.1")
	big6 := srv6.UDP6(s6, ma("2001:db8:5::9"), 4000, 80, make([]byte, 1350)) // web6: 2 segments, 80 bytes of encapsulation
	big4 := srv6.UDP4(s4, ma("10.5.0.7"), 4000, 80, make([]byte, 1350))      // v4: 3 segments, 96 bytes
	big4[6] |= 0x40                                                          // DF
	srv6.SetIPv4Checksum(big4)
	nodf := srv6.UDP4(s4, ma("10.5.0.7"), 4000, 80, make([]byte, 1350))
	drops := func() uint64 {
		t.Helper()
		ds, err := in.DropCounts()
		if err != nil {
			t.Fatal(err)
		}
		return ds[drop.IngTooBig]
	}

	d0 := drops()
	ret, out := run(t, ns, in.Program(), frame(hostMAC, big6))
	if ret != tcActRedirect {
		t.Fatalf("ipv6: ret %d, want TC_ACT_REDIRECT (the error back out)", int32(ret))
	}
	ip6 := out[14:]
	if ip6[6] != 58 || netip.AddrFrom16([16]byte(ip6[8:24])) != tunsrc || netip.AddrFrom16([16]byte(ip6[24:40])) != s6 {
		t.Fatalf("ipv6 error header %x", ip6[:40])
	}
	plen := int(binary.BigEndian.Uint16(ip6[4:]))
	icmp := ip6[40 : 40+plen]
	if icmp[0] != 2 || icmp[1] != 0 || binary.BigEndian.Uint32(icmp[4:]) != 1400-80 {
		t.Errorf("ipv6: icmp type %d code %d mtu %d, want Packet Too Big, mtu %d", icmp[0], icmp[1], binary.BigEndian.Uint32(icmp[4:]), 1400-80)
	}
	if srv6.L4Checksum(tunsrc, s6, 58, icmp) != 0 || !bytes.Equal(icmp[8:], big6[:plen-8]) {
		t.Errorf("ipv6: bad checksum or quote (%d bytes)", plen-8)
	}
	if got := drops(); got != d0+1 {
		t.Errorf("ing-too-big %d -> %d", d0, got)
	}

	ret, out = run(t, ns, in.Program(), frame(hostMAC, big4))
	if ret != tcActRedirect {
		t.Fatalf("ipv4: ret %d, want TC_ACT_REDIRECT", int32(ret))
	}
	ip4 := out[14:]
	if srv6.Checksum(ip4[:20]) != 0 || ip4[9] != 1 || netip.AddrFrom4([4]byte(ip4[16:20])) != s4 || binary.BigEndian.Uint16(ip4[2:]) != 56 {
		t.Fatalf("ipv4 error header %x", ip4[:20])
	}
	icmp = ip4[20:56]
	if icmp[0] != 3 || icmp[1] != 4 || binary.BigEndian.Uint16(icmp[6:]) != 1400-96 || srv6.Checksum(icmp) != 0 ||
		!bytes.Equal(icmp[8:], big4[:28]) {
		t.Errorf("ipv4: icmp %x, want fragmentation needed, mtu %d, the header and 8 bytes quoted", icmp, 1400-96)
	}
	if got := drops(); got != d0+2 {
		t.Errorf("ing-too-big %d -> %d", d0, got)
	}

	f := frame(hostMAC, nodf)
	ret, out = run(t, ns, in.Program(), f)
	if ret != tcActUnspec || !bytes.Equal(out[:len(f)], f) {
		t.Fatalf("ipv4 without DF: ret %d, want the packet untouched to the kernel", int32(ret))
	}
}
