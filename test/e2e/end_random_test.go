package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	cebpf "github.com/cilium/ebpf"

	"github.com/srchain/srchain/internal/datapath"
	"github.com/srchain/srchain/internal/opot"
	"github.com/srchain/srchain/internal/opotdp"
	"github.com/srchain/srchain/internal/srv6"
)

// endRandomPerClass is how many random packets each class sends.
const endRandomPerClass = 48

// endRandomBatch packets are sent at once; between batches the lines
// rest, so the kernel's global ICMP budget (icmp_msgs_burst 50, refilled
// at icmp_msgs_per_sec) never decides what a sender gets back.
const endRandomBatch = 12

// TestEndDifferentialRandom sends seeded random packets of every class
// where the fast path and the kernel's seg6local End could disagree
// (issue 8: frames for other hosts, Hop-by-Hop, odd sources, extension
// headers before the SRH, limits and TLV readings, the next segment a
// local or special address, hop limits, chains of local SIDs) through
// three endpoints: the kernel's End, srchain's tc End and tc + XDP End
// (each with the kernel route as its slow path). What the receivers get
// and the ICMPv6 errors the senders get back must be the same multisets,
// byte for byte. SRCHAIN_END_SEED overrides the seed (logged). The tc +
// XDP End also does the OPoT transit of a chain through endSID (its
// code runs on every packet to a SID, tc and XDP), whose egress SID no
// random packet carries: it must change nothing the kernel would not.
func TestEndDifferentialRandom(t *testing.T) {
	endRequireRoot(t)
	seed := uint64(8986)
	if v := os.Getenv("SRCHAIN_END_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("SRCHAIN_END_SEED: %v", err)
		}
	}
	t.Logf("seed %d (SRCHAIN_END_SEED=%d reproduces)", seed, seed)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	kern := newEndLine(t, "k")
	lines := []*endLine{kern}
	names := []string{"kernel", "tc", "tc+xdp"}
	ends := []*datapath.End{nil}
	for _, tag := range []string{"b", "x"} {
		l := newEndLine(t, tag)
		var opts datapath.EndOptions
		if tag == "x" {
			opts.OPoT = opotTransitOnEndSID(t)
		}
		end, err := datapath.LoadEnd(opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { end.Close() })
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
		if err := end.SetSIDPrefix(endSIDC, datapath.BehaviorEnd, 0, netip.Addr{}); err != nil {
			t.Fatal(err)
		}
		if err := end.SetNextCSID(endSIDC.Addr(), 32, 16); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
		ends = append(ends, end)
	}
	for _, l := range lines {
		for _, args := range endKernelRoutes {
			if _, err := l.e.Run(ctx, "ip", args...); err != nil {
				t.Fatal(err)
			}
		}
		// A subnet-router anycast address and ::1 are local: the next
		// segment may name them.
		for _, k := range [][2]string{{"net.ipv4.icmp_msgs_burst", "10000"}, {"net.ipv4.icmp_msgs_per_sec", "100000"}} {
			_ = l.e.Sysctl(k[0], k[1]) // per namespace on recent kernels; the batches stay under the defaults anyway
		}
	}

	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	g := &endGen{rng: rng}
	total := 0
	for _, class := range endRandomClasses {
		t.Run(class.name, func(t *testing.T) {
			for b := 0; b < endRandomPerClass/endRandomBatch; b++ {
				var frames [][]byte
				for i := 0; i < endRandomBatch; i++ {
					frames = append(frames, class.gen(g, fmt.Sprintf("%s %d.%d", class.name, b, i)))
				}
				total += len(frames)
				got, icmp := make([][]string, len(lines)), make([][]string, len(lines))
				for _, l := range lines {
					l.drain()
					l.drainSender()
				}
				for _, l := range lines {
					for _, f := range frames {
						if err := l.send(f); err != nil {
							t.Fatal(err)
						}
					}
				}
				time.Sleep(50 * time.Millisecond)
				deadline := time.Now().Add(300 * time.Millisecond)
				for i, l := range lines {
					got[i] = sortedStrings(receiveAny(l, deadline))
					icmp[i] = sortedStrings(l.receiveICMP(time.Now().Add(100*time.Millisecond), false))
				}
				for i := 1; i < len(lines); i++ {
					if d := multisetDiff(got[0], got[i]); d != "" {
						t.Errorf("seed %d batch %d: frames at the receiver, kernel vs %s:\n%s\ninput:\n%s", seed, b, names[i], d, hexList(frames))
					}
					if d := multisetDiff(icmp[0], icmp[i]); d != "" {
						t.Errorf("seed %d batch %d: ICMPv6 errors at the sender, kernel vs %s:\n%s\ninput:\n%s", seed, b, names[i], d, hexList(frames))
					}
				}
				time.Sleep(60 * time.Millisecond) // ICMP budget refill
			}
		})
	}
	for i, end := range ends {
		if end == nil {
			continue
		}
		pass, err := end.PassCounts()
		if err != nil {
			t.Fatal(err)
		}
		fib, err := end.FIBCounts()
		if err != nil {
			t.Fatal(err)
		}
		drops, err := end.DropCounts()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d packets; passed to the kernel %v; fib %v; drops %v", names[i], total, pass, fib, drops)
		if fib["success"]+fib["redirect-neigh"] == 0 {
			t.Errorf("%s: the fast path forwarded nothing", names[i])
		}
	}
}

// receiveAny returns every IPv6 frame the receiver got until deadline
// (whatever its source: a packet with an odd source forwarded by one
// line and not the other must show), leaving out the endpoint's own
// neighbour discovery and MLD (multicast frames, ICMPv6 type >= 130).
func receiveAny(l *endLine, deadline time.Time) [][]byte {
	var got [][]byte
	buf := make([]byte, 65536)
	for {
		n, from, err := unix.Recvfrom(l.rx, buf, unix.MSG_DONTWAIT)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			if time.Now().After(deadline) {
				return got
			}
			time.Sleep(5 * time.Millisecond)
			continue
		}
		if err != nil {
			return got
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		f := buf[:n]
		if len(f) < 14+40 || f[12] != 0x86 || f[13] != 0xdd || f[0]&1 != 0 {
			continue // not IPv6, or multicast (the endpoint's MLD reports)
		}
		if f[14+6] == 58 && len(f) > 14+40 && f[14+40] >= 130 {
			continue
		}
		got = append(got, append([]byte(nil), f...))
	}
}

func sortedStrings(fs [][]byte) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = string(f)
	}
	slices.Sort(out)
	return out
}

// multisetDiff lists what only a or only b holds ("" when equal).
func multisetDiff(a, b []string) string {
	count := map[string]int{}
	for _, s := range a {
		count[s]++
	}
	for _, s := range b {
		count[s]--
	}
	var buf bytes.Buffer
	for s, n := range count {
		switch {
		case n > 0:
			fmt.Fprintf(&buf, "  only kernel (%d): %x\n", n, s)
		case n < 0:
			fmt.Fprintf(&buf, "  only srchain (%d): %x\n", -n, s)
		}
	}
	return buf.String()
}

func hexList(fs [][]byte) string {
	var buf bytes.Buffer
	for _, f := range fs {
		fmt.Fprintf(&buf, "  %x\n", f)
	}
	return buf.String()
}

// endGen builds random packets from the sender to the endpoint.
type endGen struct{ rng *rand.Rand }

func (g *endGen) n(k int) int { return g.rng.IntN(k) }

func (g *endGen) pick(as ...netip.Addr) netip.Addr { return as[g.n(len(as))] }

// routedAddr is a random address behind the endpoint's route to the
// receiver (fc00:2::/64).
func (g *endGen) routedAddr() netip.Addr {
	b := endNext.As16()
	binary.BigEndian.PutUint64(b[8:], g.rng.Uint64()|1)
	return netip.AddrFrom16(b)
}

// tlvs is a random TLV area in the SRH's 8-byte grain: PadN, experimental
// types, and type 0 (Pad1 to RFC 8754, a TLV with a length to the
// kernel), tiling or not.
func (g *endGen) tlvs() []byte {
	var out []byte
	for k := g.n(4); k > 0; k-- {
		switch g.n(4) {
		case 0:
			out = append(out, 0) // a lone type 0 byte
		case 1:
			l := g.n(6)
			out = append(append(out, 4, byte(l)), make([]byte, l)...)
		default:
			l := g.n(10)
			v := make([]byte, l)
			for i := range v {
				v[i] = byte(g.rng.Uint32())
			}
			out = append(append(out, byte(0x80+g.n(0x7f)), byte(l)), v...)
		}
	}
	for len(out)%8 != 0 {
		out = append(out, 0)
	}
	return out
}

// srh is a raw SRH: segments in wire order (segment[0] last visited),
// SL, TLV bytes appended.
func (g *endGen) srh(nh byte, wire []netip.Addr, sl int, tlvs []byte) []byte {
	hdrlen := (len(wire)*16 + len(tlvs)) / 8
	out := []byte{nh, byte(hdrlen), 4, byte(sl), byte(len(wire) - 1), 0, 0, 0}
	for _, a := range wire {
		b := a.As16()
		out = append(out, b[:]...)
	}
	return append(out, tlvs...)
}

// travel returns wire-order segments for a path whose active SID is
// first (endSID or endSIDX), with n more segments after it, and SL.
func (g *endGen) travel(active netip.Addr, next []netip.Addr) ([]netip.Addr, int) {
	path := append([]netip.Addr{active}, next...)
	wire := slices.Clone(path)
	slices.Reverse(wire)
	return wire, len(path) - 1
}

// pkt is IPv6 from src to dst with the given extension bytes (first
// next header nh) before a UDP payload.
func (g *endGen) pkt(src, dst netip.Addr, hl uint8, nh byte, ext []byte, tag string) []byte {
	udp := srv6.UDP6(endSrc, endNext2, 1000, 2000, []byte(tag))
	payload := append(slices.Clone(ext), udp...)
	h := srv6.IPv6{HopLimit: hl, TrafficClass: uint8(g.n(256)), FlowLabel: g.rng.Uint32() & 0xfffff,
		NextHeader: nh, Src: src, Dst: dst, PayloadLen: uint16(len(payload))}
	return append(h.AppendTo(nil), payload...)
}

// valid is a well-formed End packet (SRH right after IPv6, 1-5 more
// segments, random TLVs that tile for the kernel).
func (g *endGen) valid(tag string) []byte {
	active := g.pick(endSID, endSID, endSID, endSIDX)
	var next []netip.Addr
	for k := 1 + g.n(5); k > 0; k-- {
		next = append(next, g.routedAddr())
	}
	wire, sl := g.travel(active, next)
	var tlvs []byte
	if g.n(2) == 0 {
		l := g.n(3) * 8
		if l > 0 {
			tlvs = append([]byte{4, byte(l - 2)}, make([]byte, l-2)...)
		}
	}
	return g.pkt(endSrc, active, uint8(2+g.n(254)), srv6.ProtoRouting, g.srh(srv6.ProtoIPv6, wire, sl, tlvs), tag)
}

func (g *endGen) frame(ip []byte) []byte {
	return srv6.Ether(endMACs.eIn, endMACs.sIf, srv6.EtherTypeIPv6, ip)
}

// optsHdr is an 8-byte Hop-by-Hop / Destination Options header.
func optsHdr(nh byte, opts ...byte) []byte {
	out := append([]byte{nh, 0}, opts...)
	for len(out) < 8 {
		out = append(out, 0) // Pad1
	}
	return out[:8]
}

type endRandomClass struct {
	name string
	gen  func(g *endGen, tag string) []byte // a whole frame
}

var endRandomClasses = []endRandomClass{
	{"valid", func(g *endGen, tag string) []byte { return g.frame(g.valid(tag)) }},
	{"next-c-sid", func(g *endGen, tag string) []byte { return g.frame(g.csid(tag)) }},
	{"mutated", func(g *endGen, tag string) []byte {
		ip := g.valid(tag)
		for k := 1 + g.n(3); k > 0; k-- {
			off := 40 + g.n(min(len(ip)-40, 8+16*6+24))
			if g.n(4) == 0 {
				off = 4 + g.n(4)
			}
			ip[off] = byte(g.rng.Uint32())
		}
		if g.n(8) == 0 {
			ip = ip[:40+g.n(len(ip)-40)]
		}
		return g.frame(ip)
	}},
	{"not-for-this-host", func(g *endGen, tag string) []byte {
		dst := []net.HardwareAddr{{0x02, 0, 0, 0, 9, 9}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, {0x33, 0x33, 0, 0, 0, 1}}[g.n(3)]
		return srv6.Ether(dst, endMACs.sIf, srv6.EtherTypeIPv6, g.valid(tag))
	}},
	{"hop-by-hop", func(g *endGen, tag string) []byte {
		ip := g.valid(tag)
		var opt []byte
		switch g.n(6) {
		case 0:
			opt = []byte{1, 4, 0, 0, 0, 0} // PadN
		case 1:
			opt = []byte{5, 2, 0, 0} // router alert
		case 2:
			opt = []byte{0xc2, 4, 0, 1, 0, 0} // jumbo payload (bad: payload length set)
		case 3:
			opt = []byte{byte(0x1e | g.n(4)<<6), 2, 0, 0} // unknown, every action
		case 4:
			opt = []byte{1, 5, 0, 0, 0, 0} // PadN past the header
		default:
			opt = []byte{0, 0, 0, 0, 0, 0} // Pad1s
		}
		if g.n(3) == 0 {
			ip[7] = byte(g.n(3))
		}
		return g.frame(insertExt(ip, srv6.ProtoHopByHop, optsHdr(ip[6], opt...)))
	}},
	{"source", func(g *endGen, tag string) []byte {
		ip := g.valid(tag)
		src := g.pick(netip.IPv6Unspecified(), netip.IPv6Loopback(), netip.MustParseAddr("fe80::1"),
			netip.MustParseAddr("ff02::1"), netip.MustParseAddr("ff0e::5"), netip.MustParseAddr("::ffff:10.0.0.1"),
			netip.MustParseAddr("::10.0.0.1"), endSrc)
		b := src.As16()
		copy(ip[8:24], b[:])
		return g.frame(ip)
	}},
	{"ext-order", func(g *endGen, tag string) []byte {
		ip := g.valid(tag)
		switch g.n(6) {
		case 0: // fragment, offset 0 or not
			frag := []byte{ip[6], 0, 0, 0, 0, 0, 0, 7}
			if g.n(2) == 0 {
				frag[3] = 8 // offset 1
			}
			return g.frame(insertExt(ip, 44, frag))
		case 1: // AH (payload len 1: 12 bytes... keep 8-byte aligned: 16 bytes)
			ah := append([]byte{ip[6], 2, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1}, 0, 0, 0, 0)
			return g.frame(insertExt(ip, 51, ah))
		case 2: // 1..6 Destination Options headers
			for k := 1 + g.n(6); k > 0; k-- {
				ip = insertExt(ip, srv6.ProtoDestOpts, optsHdr(ip[6], 1, 4, 0, 0, 0, 0))
			}
			return g.frame(ip)
		case 3: // Hop-by-Hop behind a Destination Options header
			ip = insertExt(ip, srv6.ProtoHopByHop, optsHdr(ip[6], 1, 4))
			return g.frame(insertExt(ip, srv6.ProtoDestOpts, optsHdr(ip[6], 1, 4)))
		case 4: // a routing header type 0 with SL 0 in front
			rh := []byte{ip[6], 2, 0, 0, 0, 0, 0, 0}
			rh = append(rh, make([]byte, 16)...)
			return g.frame(insertExt(ip, srv6.ProtoRouting, rh))
		default: // an SRH with SL 0 in front
			rh := g.srh(ip[6], []netip.Addr{g.routedAddr()}, 0, nil)
			return g.frame(insertExt(ip, srv6.ProtoRouting, rh))
		}
	}},
	{"limits", func(g *endGen, tag string) []byte {
		switch g.n(3) {
		case 0: // 15..20 segments
			var next []netip.Addr
			for k := 14 + g.n(6); k > 0; k-- {
				next = append(next, g.routedAddr())
			}
			wire, sl := g.travel(endSID, next)
			return g.frame(g.pkt(endSrc, endSID, 64, srv6.ProtoRouting, g.srh(srv6.ProtoIPv6, wire, sl, nil), tag))
		case 1: // 14..20 small TLVs
			var tlvs []byte
			n := 14 + g.n(7)
			for i := 0; i < n; i++ {
				tlvs = append(tlvs, 4, 0)
			}
			for len(tlvs)%8 != 0 {
				tlvs = append(tlvs, 4, 0)
			}
			wire, sl := g.travel(endSID, []netip.Addr{g.routedAddr()})
			return g.frame(g.pkt(endSrc, endSID, 64, srv6.ProtoRouting, g.srh(srv6.ProtoIPv6, wire, sl, tlvs), tag))
		default: // random TLV areas, type 0 included
			wire, sl := g.travel(endSID, []netip.Addr{g.routedAddr(), g.routedAddr()})
			return g.frame(g.pkt(endSrc, endSID, 64, srv6.ProtoRouting, g.srh(srv6.ProtoIPv6, wire, sl, g.tlvs()), tag))
		}
	}},
	{"next-segment", func(g *endGen, tag string) []byte {
		next := g.pick(netip.MustParseAddr("fc00:a::2"), netip.MustParseAddr("fc00:b::1"), netip.MustParseAddr("fc00:a::"),
			netip.IPv6Loopback(), netip.IPv6Unspecified(), netip.MustParseAddr("fe80::1"), netip.MustParseAddr("ff02::1"),
			endSID, endSIDX, endNoRoute, endNonSID, endRecv, endSrc)
		wire, sl := g.travel(g.pick(endSID, endSIDX), []netip.Addr{next, g.routedAddr()})
		return g.frame(g.pkt(endSrc, wire[len(wire)-1], uint8(1+g.n(64)), srv6.ProtoRouting, g.srh(srv6.ProtoIPv6, wire, sl, nil), tag))
	}},
	{"hop-limit", func(g *endGen, tag string) []byte {
		ip := g.valid(tag)
		ip[7] = byte(g.n(3))
		return g.frame(ip)
	}},
	{"local-sid-chain", func(g *endGen, tag string) []byte {
		var next []netip.Addr
		for k := 6 + g.n(6); k > 0; k-- {
			next = append(next, endSID)
		}
		next = append(next, g.routedAddr())
		wire, sl := g.travel(endSID, next)
		return g.frame(g.pkt(endSrc, endSID, uint8(1+g.n(64)), srv6.ProtoRouting, g.srh(srv6.ProtoIPv6, wire, sl, nil), tag))
	}},
}

// insertExt puts header h (next header: ip's current first) right
// after ip's IPv6 header, as next header nh.
func insertExt(ip []byte, nh byte, h []byte) []byte {
	out := append(slices.Clone(ip[:40]), h...)
	out = append(out, ip[40:]...)
	out[6] = nh
	binary.BigEndian.PutUint16(out[4:6], uint16(len(out)-40))
	return out
}

// csid is a packet to the NEXT-C-SID SID endSIDC: a container with a
// random argument (zero sometimes: the End then moves to the next
// segment), mostly a routable next C-SID, an SRH with 0-3 more segments
// (or none at all), random hop limits including 0 and 1.
func (g *endGen) csid(tag string) []byte {
	b := endSIDC.Addr().As16()
	if g.n(5) != 0 {
		for i := 6; i < 16; i += 2 {
			if g.n(3) != 0 {
				binary.BigEndian.PutUint16(b[i:], uint16(g.rng.Uint32()))
			}
		}
		if g.n(4) != 0 {
			b[6], b[7] = 0, 0 // the next C-SID stays in the receiver's route
		}
	}
	c := netip.AddrFrom16(b)
	hl := uint8(2 + g.n(254))
	if g.n(8) == 0 {
		hl = uint8(g.n(2))
	}
	if g.n(10) == 0 {
		return g.pkt(endSrc, c, hl, 17, nil, tag) // no SRH
	}
	var next []netip.Addr
	for k := g.n(4); k > 0; k-- {
		next = append(next, g.routedAddr())
	}
	wire, sl := g.travel(c, next)
	return g.pkt(endSrc, c, hl, srv6.ProtoRouting, g.srh(srv6.ProtoIPv6, wire, sl, nil), tag)
}

// opotTransitOnEndSID loads OPoT maps holding one chain whose transit at
// endSID the End does (marked in-End), ending at an egress SID the
// random packets never carry, and returns them for
// datapath.EndOptions.OPoT.
func opotTransitOnEndSID(t *testing.T) map[string]*cebpf.Map {
	t.Helper()
	o, err := opotdp.Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	p, err := opot.GenerateFrom(rand.NewChaCha8([32]byte{8}), 3)
	if err != nil {
		t.Fatal(err)
	}
	n, err := p.Node(1)
	if err != nil {
		t.Fatal(err)
	}
	last := netip.MustParseAddr("fc00:ffff::e")
	if err := opotdp.PutChain(o, 1, 0, n, endSID, last); err != nil {
		t.Fatal(err)
	}
	if err := opotdp.SetInEnd(o, last); err != nil {
		t.Fatal(err)
	}
	return opotdp.EndMapsOf(o)
}
