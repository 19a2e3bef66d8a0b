package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/srchain/srchain/internal/ingress"
	"github.com/srchain/srchain/internal/srv6"
	"github.com/srchain/srchain/internal/state"
)

// The differential test's policy: chains at the endpoint "e" of three
// lines (sender -> e -> receiver, newEndLine): 5-tuple and destination
// matches, encap and insert, IPv4 and IPv6. Every line holds the
// kernel's policy as the compiler emits it (seg6 encap routes, an ip
// rule and table per 5-tuple chain); two lines add srchain's eBPF
// ingress in front of it (tc; tc + XDP), as `ingress: ebpf` does.
var (
	ingTunSrc = netip.MustParseAddr("fc00:b::1") // e's address toward the receiver
	ingChains = []state.IngressChain{
		{Name: "udp5k", Mode: state.ModeEncap, Dst: []netip.Prefix{netip.MustParsePrefix("2001:db8:5::/48")}, Proto: 17,
			DPort: state.PortRange{From: 5000, To: 5999}, Segments: ingSegs("fc00:2::1", "fc00:2::2", "fc00:2::d6")},
		{Name: "tcp6src", Mode: state.ModeEncap, Dst: []netip.Prefix{netip.MustParsePrefix("2001:db8:6::/48")},
			Src: []netip.Prefix{netip.MustParsePrefix("2001:db8:1::/64")}, Proto: 6,
			SPort: state.PortRange{From: 1024, To: 40000}, Segments: ingSegs("fc00:2::9", "fc00:2::d6")},
		{Name: "web4", Mode: state.ModeEncap, Dst: []netip.Prefix{netip.MustParsePrefix("10.4.0.0/16")}, Proto: 6,
			DPort: state.PortRange{From: 80, To: 89}, Segments: ingSegs("fc00:2::a", "fc00:2::d4")},
		{Name: "icmp4", Mode: state.ModeEncap, Dst: []netip.Prefix{netip.MustParsePrefix("10.6.0.0/16")}, Proto: 1,
			Segments: ingSegs("fc00:2::b", "fc00:2::d4")},
		{Name: "v6", Mode: state.ModeEncap, Dst: []netip.Prefix{netip.MustParsePrefix("2001:db8:5::/48")},
			Segments: ingSegs("fc00:2::3", "fc00:2::d6")},
		{Name: "v4", Mode: state.ModeEncap, Dst: []netip.Prefix{netip.MustParsePrefix("10.5.0.0/16")},
			Segments: ingSegs("fc00:2::4", "fc00:2::5", "fc00:2::6", "fc00:2::d4")},
		{Name: "ins", Mode: state.ModeInsert, Dst: []netip.Prefix{netip.MustParsePrefix("2001:db8:7::/48")},
			Segments: ingSegs("fc00:2::7", "fc00:2::8")},
		{Name: "ins5", Mode: state.ModeInsert, Dst: []netip.Prefix{netip.MustParsePrefix("2001:db8:6:8000::/49")}, Proto: 17,
			Segments: ingSegs("fc00:2::c", "fc00:2::8")},
	}
)

func ingSegs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

// e's IPv4 side: its address toward the sender (a /16 holding the
// test's sources; 10.1.255.255 is that subnet's broadcast) and the
// receiver's address, the next hop of the default route.
var (
	ingE4    = netip.MustParseAddr("10.1.0.254")
	ingRecv4 = netip.MustParseAddr("10.9.0.2")
)

// ingPacket is a random inner packet: IPv4 or IPv6, TCP, UDP or ICMP,
// 4..1303 payload bytes, random traffic class, flow label, hop limit
// (sometimes 1: Time Exceeded at e, nothing forwarded), destinations in
// and out of the chains' prefixes. Its first payload bytes are id. About
// half of them are then drawn into a class a hostile network sends
// (ingHostile).
func ingPacket(r *rand.Rand, id uint32) []byte {
	payload := make([]byte, 4+r.IntN(1300)) // room for the hostile headers in a 1500-byte frame
	for i := range payload {
		payload[i] = byte(r.Uint32())
	}
	binary.BigEndian.PutUint32(payload, id)
	dport := uint16(r.IntN(65536))
	switch r.IntN(4) {
	case 0:
		dport = uint16(4990 + r.IntN(1020))
	case 1:
		dport = uint16(78 + r.IntN(14))
	}
	sport := uint16(1 + r.IntN(65535))
	if r.IntN(2) == 0 {
		sport = uint16(1000 + r.IntN(40000))
	}
	if r.IntN(3) == 0 {
		s := netip.AddrFrom4([4]byte{10, 1, byte(r.IntN(256)), byte(1 + r.IntN(254))})
		d := netip.AddrFrom4([4]byte{10, byte(4 + r.IntN(3)), byte(r.IntN(256)), byte(1 + r.IntN(254))})
		var p []byte
		switch r.IntN(3) {
		case 0:
			p = srv6.UDP4(s, d, sport, dport, payload)
		case 1:
			p = srv6.TCP4(s, d, sport, dport, 0x18, payload)
		default:
			p = srv6.ICMP4EchoData(s, d, uint16(id), 1, payload)
		}
		p[1] = byte(r.IntN(256))     // TOS
		p[8] = byte(1 + r.IntN(255)) // TTL
		srv6.SetIPv4Checksum(p)
		return ingHostile4(r, p)
	}
	s := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 1, 15: byte(1 + r.IntN(254))})
	d := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, byte(4 + r.IntN(4)), byte(r.IntN(2) << 7), 8: byte(r.IntN(256)), 15: byte(1 + r.IntN(254))})
	var p []byte
	switch r.IntN(3) {
	case 0:
		p = srv6.UDP6(s, d, sport, dport, payload)
	case 1:
		p = srv6.TCP6(s, d, sport, dport, 0x18, payload)
	default:
		p = srv6.ICMP6EchoData(s, d, uint16(id), 1, payload)
	}
	word := 6<<28 | uint32(r.IntN(256))<<20 | uint32(r.IntN(1<<20))
	binary.BigEndian.PutUint32(p, word)
	p[7] = byte(2 + r.IntN(254))
	if r.IntN(16) == 0 {
		p[7] = 1
	}
	return ingHostile6(r, p)
}

// ingHostile4 draws p into an IPv4 class the kernel treats apart (or
// leaves it): options (NOP, RR, TS, LSRR, SSRR, malformed lengths),
// first, later and DF fragments, martian sources (e's own address,
// 0.0.0.0, the subnet broadcast, the limited broadcast, loopback,
// multicast).
func ingHostile4(r *rand.Rand, p []byte) []byte {
	if r.IntN(2) == 0 {
		return p
	}
	setSrc := func(a netip.Addr) []byte {
		q := append([]byte(nil), p...)
		b := a.As4()
		copy(q[12:16], b[:])
		srv6.SetIPv4Checksum(q)
		return q
	}
	switch r.IntN(12) {
	case 0:
		q, err := srv6.WithIPv4Options(p, []byte{1, 1, 1, 1}) // NOP
		if err == nil {
			return q
		}
	case 1:
		q, err := srv6.WithIPv4Options(p, []byte{7, 11, 4, 0, 0, 0, 0, 0, 0, 0, 0}) // RR, room for 2
		if err == nil {
			return q
		}
	case 2:
		// TS, full (pointer past the end: the overflow count grows; a
		// timestamp written would differ between the lines by time).
		q, err := srv6.WithIPv4Options(p, []byte{68, 12, 13, 0, 0, 0, 0, 0, 0, 0, 0, 0})
		if err == nil {
			return q
		}
	case 3:
		q, err := srv6.WithIPv4Options(p, []byte{byte([]int{131, 137}[r.IntN(2)]), 7, 4, 10, 5, 0, 1}) // LSRR/SSRR
		if err == nil {
			return q
		}
	case 4:
		q, err := srv6.WithIPv4Options(p, []byte{7, byte(r.IntN(3)), 4, 0}) // RR with a bad length
		if err == nil {
			return q
		}
	case 5:
		return srv6.IPv4Fragment(p, 0, true)
	case 6:
		return srv6.IPv4Fragment(p, uint16(1+r.IntN(100)), r.IntN(2) == 0)
	case 7:
		q := append([]byte(nil), p...)
		q[6] |= 0x40 // DF: not a fragment, the fast path's
		srv6.SetIPv4Checksum(q)
		return q
	case 8:
		return setSrc(ingE4)
	case 9:
		return setSrc(netip.AddrFrom4([4]byte{10, 1, 255, 255}))
	case 10:
		return setSrc([]netip.Addr{netip.IPv4Unspecified(), netip.AddrFrom4([4]byte{255, 255, 255, 255}),
			netip.AddrFrom4([4]byte{127, 0, 0, 1}), netip.AddrFrom4([4]byte{224, 0, 0, 5})}[r.IntN(4)])
	case 11:
		return setSrc(netip.AddrFrom4([4]byte{10, 9, 0, 1})) // e's other address
	}
	return p
}

// ingHostile6 draws p into an IPv6 class the kernel treats apart (or
// leaves it): Hop-by-Hop, Destination Options (up to 8 headers), atomic,
// first and later fragments, AH, a routing header (a valid SRH, one with
// SL > last entry, type 0 and 2), payload length 0, odd sources
// (unspecified, link-local, IPv4-mapped, loopback, e's own address) and
// destinations (IPv4-mapped, e's own address).
func ingHostile6(r *rand.Rand, p []byte) []byte {
	if r.IntN(2) == 0 {
		return p
	}
	ext := func(h ...srv6.ExtHdr) []byte {
		q, err := srv6.WithExtHeaders(p, h...)
		if err != nil {
			return p
		}
		return q
	}
	setAddr := func(off int, a netip.Addr) []byte {
		q := append([]byte(nil), p...)
		b := a.As16()
		copy(q[off:off+16], b[:])
		return q
	}
	switch r.IntN(12) {
	case 0:
		return ext(srv6.OptsHdr(srv6.ExtHopByHop, r.IntN(2)))
	case 1:
		var hs []srv6.ExtHdr
		if r.IntN(2) == 0 {
			hs = append(hs, srv6.OptsHdr(srv6.ExtHopByHop, 0))
		}
		for range 1 + r.IntN(8) {
			hs = append(hs, srv6.OptsHdr(srv6.ExtDestOpts, r.IntN(2)))
		}
		return ext(hs...)
	case 2:
		return ext(srv6.FragHdr(0, false, r.Uint32())) // atomic
	case 3:
		return ext(srv6.FragHdr(0, true, r.Uint32()))
	case 4:
		return ext(srv6.FragHdr(uint16(1+r.IntN(100)), r.IntN(2) == 0, r.Uint32()))
	case 5:
		return ext(srv6.AHHdr(r.Uint32(), r.Uint32()))
	case 6:
		n := 1 + r.IntN(3)
		switch r.IntN(4) {
		case 0:
			return ext(srv6.RoutingHdr(4, uint8(r.IntN(n)), uint8(n-1), n))
		case 1:
			return ext(srv6.RoutingHdr(4, uint8(n+r.IntN(3)), uint8(n-1), n)) // SL > last entry
		default:
			return ext(srv6.RoutingHdr(uint8([]int{0, 2}[r.IntN(2)]), 0, 0, n))
		}
	case 7:
		q := append([]byte(nil), p...)
		q[4], q[5] = 0, 0
		return q
	case 8:
		return setAddr(8, []netip.Addr{netip.IPv6Unspecified(), netip.MustParseAddr("fe80::1"),
			netip.MustParseAddr("::ffff:10.1.0.1"), netip.IPv6Loopback(), netip.MustParseAddr("fc00:a::2")}[r.IntN(5)])
	case 9:
		return setAddr(24, []netip.Addr{netip.MustParseAddr("::ffff:10.5.0.1"), netip.MustParseAddr("fc00:b::1")}[r.IntN(2)])
	case 10:
		return setAddr(8, netip.IPv6Unspecified()) // insert mode: ip6_forward refuses it
	}
	return p
}

// ingReceive returns the frames the receiver captured until one arrived
// and the line was quiet for 50 ms, or deadline: every IPv4 and IPv6
// packet e forwarded (encapsulated, inserted or plain), not ARP,
// neighbour discovery or MLD.
func ingReceive(l *endLine, deadline time.Time) [][]byte {
	return l.receiveWhere(deadline, func(f []byte) bool {
		if len(f) < 14+20 || f[0]&1 != 0 {
			return false // multicast frames: MLD, not the test's
		}
		switch {
		case f[12] == 0x08 && f[13] == 0x00:
			return true
		case f[12] == 0x86 && f[13] == 0xdd && len(f) >= 14+41:
			if f[14+6] == 58 { // ICMPv6 right behind: not ND (133-137) or MLD (130-132, 143)
				t := f[14+40]
				return !(t >= 130 && t <= 137 || t == 143)
			}
			// MLD reports (Hop-by-Hop first) come from e's link-local
			// address; the kernel forwards no test packet with such a source.
			return !(f[14+6] == 0 && f[14+8] == 0xfe && f[14+9]&0xc0 == 0x80)
		}
		return false
	})
}

// TestIngressDifferential sends the same random inner packets (IPv4 and
// IPv6; TCP, UDP, ICMP; 4..1403 payload bytes; random traffic class,
// flow label, hop limit, destinations in and out of the chains) through
// the kernel's seg6 encap routes (and an ip rule for the 5-tuple chain)
// and through srchain's eBPF ingress in tc and in XDP (+ tc) with the
// same policy, and requires the next hop to capture the same frames, byte
// for byte. Then again with net.ipv6.seg6_flowlabel = 1 (the outer flow
// label from the flow hash) and -1 (zero).
func TestIngressDifferential(t *testing.T) {
	endRequireRoot(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	dev := endIf("e1")
	chains := make([]state.IngressChain, len(ingChains))
	for i, c := range ingChains {
		c.Dev = dev
		chains[i] = c
	}
	cfg := ingress.Config{Chains: chains}
	type line struct {
		name string
		*endLine
		in *ingress.Ingress
	}
	var lines []*line
	for _, tag := range []string{"ik", "it", "ix"} {
		l := &line{name: map[string]string{"ik": "kernel", "it": "tc", "ix": "tc+xdp"}[tag], endLine: newEndLine(t, tag)}
		for _, k := range []string{"net.ipv4.ip_forward", "net.ipv6.icmp.ratelimit", "net.ipv4.icmp_ratelimit"} {
			v := map[string]string{"net.ipv4.ip_forward": "1", "net.ipv6.icmp.ratelimit": "0", "net.ipv4.icmp_ratelimit": "0"}[k]
			if err := l.e.Sysctl(k, v); err != nil {
				t.Fatal(err)
			}
		}
		// The kernel's policy on every line (the eBPF ingress leaves
		// what it does not finish to it), IPv4 on e, and default routes
		// to the receiver so that what no chain takes is forwarded and
		// compared too.
		for _, args := range append([][]string{
			{"sr", "tunsrc", "set", ingTunSrc.String()},
			{"-4", "addr", "add", ingE4.String() + "/16", "dev", endIf("e0")},
			{"-4", "addr", "add", "10.9.0.1/24", "dev", endIf("e1")},
			{"-4", "neigh", "replace", ingRecv4.String(), "lladdr", endMACs.rIf.String(), "dev", dev, "nud", "permanent"},
			{"-4", "route", "add", "default", "via", ingRecv4.String(), "dev", dev},
			{"-6", "route", "add", "default", "via", endRecv.String(), "dev", dev},
		}, ingress.KernelPolicy(ingChains, dev)...) {
			if out, err := l.e.Run(ctx, "ip", args...); err != nil {
				t.Fatalf("ip %v: %v %s", args, err, out)
			}
		}
		if tag != "ik" {
			in, err := ingress.Load(ingress.Options{XDP: tag == "ix", Capacity: ingress.CapacityFor(len(chains))})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { in.Close() })
			l.in = in
			// Unpinned links detach when closed: keep them until the end.
			err = l.e.Do(func() error {
				tl, err := in.Attach(l.eIn, "")
				if err != nil {
					return err
				}
				t.Cleanup(func() { tl.Close() })
				if tag == "ix" {
					xl, err := in.AttachXDP(l.eIn, "")
					if err != nil {
						return err
					}
					t.Cleanup(func() { xl.Close() })
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if tag == "ix" {
				// XDP_REDIRECT into a veth needs NAPI on the peer.
				if _, err := l.r.Run(ctx, "ethtool", "-K", endIf("r0"), "gro", "on"); err != nil {
					t.Fatal(err)
				}
			}
		}
		lines = append(lines, l)
	}
	update := func(t *testing.T) {
		for _, l := range lines {
			if l.in == nil {
				continue
			}
			s, err := ingress.ReadSettings(l.e, state.Node{TunSrc: ingTunSrc}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.in.Update(cfg, s); err != nil {
				t.Fatal(err)
			}
		}
	}

	r := rand.New(rand.NewPCG(2026, 8))
	id := uint32(0)
	for _, fl := range []struct {
		sysctl string
		n      int
	}{{"0", 500}, {"1", 120}, {"-1", 80}} {
		t.Run("seg6_flowlabel="+fl.sysctl, func(t *testing.T) {
			for _, l := range lines {
				if err := l.e.Sysctl("net.ipv6.seg6_flowlabel", fl.sysctl); err != nil {
					t.Fatal(err)
				}
			}
			update(t)
			var delivered, steered, differ int
			for i := 0; i < fl.n; i++ {
				id++
				inner := ingPacket(r, id)
				et := uint16(srv6.EtherTypeIPv6)
				if inner[0]>>4 == 4 {
					et = srv6.EtherTypeIPv4
				}
				dst := endMACs.eIn
				if r.IntN(20) == 0 {
					dst = net.HardwareAddr{0x02, 0, 0, 0, 0x5e, byte(r.IntN(256))} // another host's frame
				}
				frame := srv6.Ether(dst, endMACs.sIf, et, inner)
				for _, l := range lines {
					l.drain()
					if err := l.send(frame); err != nil {
						t.Fatal(err)
					}
				}
				deadline := time.Now().Add(100 * time.Millisecond)
				got := make([][][]byte, len(lines))
				for k, l := range lines {
					got[k] = ingReceive(l.endLine, deadline)
				}
				if len(got[0]) > 0 {
					delivered++
					if f := got[0][0]; f[12] == 0x86 && f[14+6] == 43 {
						steered++
					}
				}
				for k := 1; k < len(lines); k++ {
					if !sameFrames(got[0], got[k]) {
						differ++
						if differ <= 5 {
							t.Errorf("packet %d (%d bytes, %x...): %s got %d frames, kernel %d:\n%s\nkernel:\n%s", id, len(inner),
								inner[:min(len(inner), 48)], lines[k].name, len(got[k]), len(got[0]), hexFrames(got[k]), hexFrames(got[0]))
						}
					}
				}
			}
			t.Logf("%d packets, %d forwarded by the kernel (%d of them steered into a chain), %d differences", fl.n, delivered, steered, differ)
			if delivered < fl.n/2 || steered < fl.n/4 {
				t.Errorf("only %d of %d packets forwarded, %d steered: the comparison proves little", delivered, fl.n, steered)
			}
		})
	}
	for _, l := range lines[1:] {
		out, err := l.in.Outcomes()
		if err != nil {
			t.Fatal(err)
		}
		counts, err := l.in.ChainCounts(len(chains))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("srchain %s: outcomes %v, chains %v", l.name, out, counts)
		if out["redirect"] == 0 || out["kernel"] == 0 {
			t.Errorf("%s: redirected %d, left %d to the kernel: the draw missed a side", l.name, out["redirect"], out["kernel"])
		}
		if l.name == "tc+xdp" && out["xdp-pass"] >= out["redirect"] {
			t.Errorf("%s: XDP passed %d packets, redirected %d: the fast path should take most", l.name, out["xdp-pass"], out["redirect"])
		}
	}
}

func sameFrames(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

func hexFrames(fs [][]byte) string {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "  %x\n", f[:min(len(f), 160)])
	}
	return b.String()
}
