package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/srchain/srchain/internal/ingress"
	"github.com/srchain/srchain/internal/srv6"
	"github.com/srchain/srchain/internal/state"
)

// The differential test's policy: four chains at the endpoint "e" of
// three lines (sender -> e -> receiver, newEndLine). The kernel line
// steers with seg6 encap routes (and an ip rule + table for the 5-tuple
// chain), the others with srchain's eBPF ingress (tc; tc + XDP).
var (
	ingTunSrc = netip.MustParseAddr("fc00:b::1") // e's address toward the receiver
	ingChains = []state.IngressChain{
		{Name: "udp5k", Mode: state.ModeEncap, Dst: []netip.Prefix{netip.MustParsePrefix("2001:db8:5::/48")}, Proto: 17,
			DPort: state.PortRange{From: 5000, To: 5999}, Segments: ingSegs("fc00:2::1", "fc00:2::2", "fc00:2::d6")},
		{Name: "v6", Mode: state.ModeEncap, Dst: []netip.Prefix{netip.MustParsePrefix("2001:db8:5::/48")},
			Segments: ingSegs("fc00:2::3", "fc00:2::d6")},
		{Name: "v4", Mode: state.ModeEncap, Dst: []netip.Prefix{netip.MustParsePrefix("10.5.0.0/16")},
			Segments: ingSegs("fc00:2::4", "fc00:2::5", "fc00:2::6", "fc00:2::d4")},
		{Name: "ins", Mode: state.ModeInsert, Dst: []netip.Prefix{netip.MustParsePrefix("2001:db8:7::/48")},
			Segments: ingSegs("fc00:2::7", "fc00:2::8")},
	}
)

func ingSegs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

// ingKernelRoutes are the kernel line's policy, as internal/apply
// installs it (encap: travel order; inline: iproute2 adds the slot of
// the destination itself).
func ingKernelRoutes(dev string) [][]string {
	segs := func(c state.IngressChain) string {
		var s []string
		for _, a := range c.Segments {
			s = append(s, a.String())
		}
		return strings.Join(s, ",")
	}
	mode := map[state.EncapMode]string{state.ModeEncap: "encap", state.ModeInsert: "inline"}
	c := ingChains
	return [][]string{
		{"-6", "rule", "add", "priority", "1000", "to", c[0].Dst[0].String(), "ipproto", "udp", "dport", "5000-5999", "table", "1000"},
		{"-6", "route", "add", c[0].Dst[0].String(), "table", "1000", "encap", "seg6", "mode", mode[c[0].Mode], "segs", segs(c[0]), "dev", dev},
		{"-6", "route", "add", c[1].Dst[0].String(), "encap", "seg6", "mode", mode[c[1].Mode], "segs", segs(c[1]), "dev", dev},
		{"-4", "route", "add", c[2].Dst[0].String(), "encap", "seg6", "mode", mode[c[2].Mode], "segs", segs(c[2]), "dev", dev},
		{"-6", "route", "add", c[3].Dst[0].String(), "encap", "seg6", "mode", mode[c[3].Mode], "segs", segs(c[3]), "dev", dev},
	}
}

// ingPacket is a random inner packet: IPv4 or IPv6, TCP, UDP or ICMP,
// 0..1400 payload bytes, random traffic class, flow label, hop limit
// (sometimes 1: Time Exceeded at e, nothing forwarded), destinations in
// and out of the chains' prefixes. Its first payload bytes are id.
func ingPacket(r *rand.Rand, id uint32) []byte {
	payload := make([]byte, 4+r.IntN(1400))
	for i := range payload {
		payload[i] = byte(r.Uint32())
	}
	binary.BigEndian.PutUint32(payload, id)
	dport := uint16(r.IntN(65536))
	if r.IntN(2) == 0 {
		dport = uint16(4990 + r.IntN(1020))
	}
	sport := uint16(1 + r.IntN(65535))
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
		binary.BigEndian.PutUint16(p[10:], 0)
		binary.BigEndian.PutUint16(p[10:], ^ip4Sum(p[:20]))
		return p
	}
	s := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 1, 15: byte(1 + r.IntN(254))})
	d := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, byte(4 + r.IntN(4)), 8: byte(r.IntN(256)), 15: byte(1 + r.IntN(254))})
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
	return p
}

func ip4Sum(h []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(h); i += 2 {
		s += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// ingReceive returns the frames the receiver captured until one arrived
// and the line was quiet for 50 ms, or deadline: IPv6 with a routing
// header next (the encapsulated or inserted packets; ND and MLD are
// not).
func ingReceive(l *endLine, deadline time.Time) [][]byte {
	return l.receiveWhere(deadline, func(f []byte) bool {
		return len(f) >= 14+40 && f[12] == 0x86 && f[13] == 0xdd && f[14+6] == 43
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
		for _, k := range []string{"net.ipv4.ip_forward", "net.ipv6.icmp.ratelimit"} {
			v := map[string]string{"net.ipv4.ip_forward": "1", "net.ipv6.icmp.ratelimit": "0"}[k]
			if err := l.e.Sysctl(k, v); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := l.e.Run(ctx, "ip", "sr", "tunsrc", "set", ingTunSrc.String()); err != nil {
			t.Fatal(err)
		}
		if tag == "ik" {
			for _, args := range ingKernelRoutes(dev) {
				if _, err := l.e.Run(ctx, "ip", args...); err != nil {
					t.Fatal(err)
				}
			}
		} else {
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
	}{{"0", 300}, {"1", 80}, {"-1", 40}} {
		t.Run("seg6_flowlabel="+fl.sysctl, func(t *testing.T) {
			for _, l := range lines {
				if err := l.e.Sysctl("net.ipv6.seg6_flowlabel", fl.sysctl); err != nil {
					t.Fatal(err)
				}
			}
			update(t)
			var delivered, differ int
			for i := 0; i < fl.n; i++ {
				id++
				inner := ingPacket(r, id)
				et := uint16(srv6.EtherTypeIPv6)
				if inner[0]>>4 == 4 {
					et = srv6.EtherTypeIPv4
				}
				frame := srv6.Ether(endMACs.eIn, endMACs.sIf, et, inner)
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
			t.Logf("%d packets, %d encapsulated and forwarded by the kernel, %d differences", fl.n, delivered, differ)
			if delivered < fl.n/3 {
				t.Errorf("only %d of %d packets forwarded: the comparison proves little", delivered, fl.n)
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
		if out["redirect"] == 0 {
			t.Errorf("%s: no packet redirected by the program", l.name)
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
