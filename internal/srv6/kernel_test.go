package srv6

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/srchain/srchain/internal/testutil"
	"net"
	"net/netip"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/srchain/srchain/internal/netns"
)

// TestMutateEndMatchesKernel sends the same packets through the kernel's
// seg6local End (RFC 8986 4.1) in a namespace and through MutateEnd, and
// compares: the forwarded bytes must be identical, and whatever the model
// drops the kernel must drop. Documented divergences are asserted as such.
//
//	ns h: hin ─── rin :ns r: rout ─── hout
//	sender AF_PACKET on hin; sink AF_PACKET on hout.
//	r: fc00:2::e End; fc00::/16 via hout.
func TestMutateEndMatchesKernel(t *testing.T) {
	testutil.RequireRoot(t)
	lab := newEndLab(t)

	sid := netip.MustParseAddr("fc00:2::e")
	travel := []netip.Addr{sid, netip.MustParseAddr("fc00:3::e"), netip.MustParseAddr("fc00:4::d6")}
	inner := UDP6(hostA, hostB, 1000, 2000, []byte("kernel"))
	enc := func(tlvs ...TLV) []byte {
		b, err := Encap(tunSrc, travel, inner, tlvs...)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	set := func(b []byte, off int, v byte) []byte { c := slices.Clone(b); c[off] = v; return c }
	const srh = IPv6HeaderLen
	ins, err := Insert(UDP6(hostA, hostB, 1, 2, []byte("ins")), travel[:2])
	if err != nil {
		t.Fatal(err)
	}
	withExt := func(b []byte) []byte {
		c := slices.Concat(b[:srh], []byte{ProtoDestOpts, 0, 1, 4, 0, 0, 0, 0, ProtoRouting, 0, 1, 4, 0, 0, 0, 0}, b[srh:])
		c[6], c[5] = ProtoHopByHop, c[5]+16
		return c
	}
	pad1s := enc(TLV{Type: 0x7e, Value: []byte{1, 2, 3, 4, 5}}) // TLV + one Pad1
	// Pad1 Pad1 PadN(4): the kernel reads a 2-byte TLV (0, len 0), then PadN.
	pad1Pad1PadN := enc(TLV{Type: TLVPad1}, TLV{Type: TLVPad1}, TLV{Type: TLVPadN, Value: make([]byte, 4)})
	many := make([]netip.Addr, MaxSegments+1)
	for i := range many {
		many[i] = netip.AddrFrom16([16]byte{0xfc, 0, 0, byte(i + 3), 15: 0xe})
	}
	many[0] = sid
	tooMany, _ := Encap(tunSrc, many, inner)
	hmac := enc(HMACTLV{KeyID: 9, HMAC: make([]byte, 32)}.TLV())
	red, err := EncapWith(EncapOptions{HopLimit: 64, ReducedSRH: true}, tunSrc, travel, inner)
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name string
		pkt  []byte
		// diverge: the kernel forwards what the model rejects, by design.
		diverge error
		// kernelDrops: the kernel drops what the model forwards (why).
		kernelDrops string
	}{
		{"encap sl 2", enc(), nil, ""},
		{"encap sl 1", set(enc(), srh+3, 1), nil, ""},
		{"insert", ins, nil, ""},
		{"opaque tlv + padn", enc(TLV{Type: 0x7e, Value: []byte{1, 2, 3}}), nil, ""},
		{"tlv + pad1", pad1s, nil, "seg6_validate_srh walks every TLV as type+length, so a final RFC 8754 Pad1 is 'truncated'"},
		{"pad1 pad1 padn", pad1Pad1PadN, nil, ""},
		{"behind hop-by-hop and dest opts", withExt(enc()), nil, ""},
		{"flags and tag kept", func() []byte { b := set(enc(), srh+5, 0x28); b[srh+6], b[srh+7] = 0xbe, 0xef; return b }(), nil, ""},
		{"sl 0", set(enc(), srh+3, 0), nil, ""},
		{"reduced srh (sl = last entry + 1)", red, nil, ""},
		{"sl over last entry + 1", set(enc(), srh+3, 4), nil, ""},
		{"bad routing type", set(enc(), srh+2, 0), nil, ""},
		{"last entry beyond hdr ext len", set(enc(), srh+4, 4), nil, ""},
		{"tlv overruns", set(enc(TLV{Type: 0x7e, Value: []byte{1, 2, 3, 4, 5, 6}}), srh+8+48+1, 9), nil, ""},
		{"hop limit 1", set(enc(), 7, 1), nil, ""},
		{"17 segments", tooMany, ErrTooManySegments, ""},
		{"hmac tlv without h flag", hmac, nil, ""},
		{"hmac tlv with h flag", set(hmac, srh+5, SRHFlagHMAC), nil, "seg6_hmac_validate_skb finds no key for the HMAC TLV (SRH.KernelHMAC)"},
	}
	for i := range cases {
		// A distinct flow label tells the captures apart; End keeps it.
		binary.BigEndian.PutUint32(cases[i].pkt[0:4], 6<<28|uint32(i+1))
	}
	for _, c := range cases {
		lab.send(t, c.pkt)
	}
	got := lab.collect(t, 500*time.Millisecond, 0)

	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want, merr := MutateEnd(c.pkt)
			kern, forwarded := got[uint32(i+1)]
			switch {
			case c.kernelDrops != "":
				if merr != nil || forwarded {
					t.Fatalf("expected the kernel alone to drop: model %v, kernel forwarded %v", merr, forwarded)
				}
				t.Logf("known divergence: kernel drops, model forwards: %s", c.kernelDrops)
			case c.diverge != nil:
				if !errors.Is(merr, c.diverge) || !forwarded {
					t.Fatalf("expected divergence %v: model %v, kernel forwarded %v", c.diverge, merr, forwarded)
				}
				t.Logf("known divergence: kernel forwards, model drops with %v", merr)
			case merr != nil && forwarded:
				t.Fatalf("model drops (%v, reason %v), kernel forwards %x", merr, Reason(merr), kern)
			case merr == nil && !forwarded:
				t.Fatalf("model forwards, kernel dropped")
			case merr == nil:
				mustEq(t, "kernel vs model", kern, want)
			default:
				t.Logf("both drop; model reason %v", Reason(merr))
			}
		})
	}
}

type endLab struct {
	h      *netns.NS
	tx, rx int // AF_PACKET sockets in h
	txIdx  int
	rinMAC net.HardwareAddr
	srcMAC net.HardwareAddr
}

func newEndLab(t *testing.T) *endLab {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	mk := func(suffix string) *netns.NS {
		name := fmt.Sprintf("srct-c-%d-%s", os.Getpid(), suffix)
		_ = netns.Delete(name) // left over from a killed run with a recycled PID
		ns, err := netns.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ns.Delete() })
		return ns
	}
	h, r := mk("h"), mk("r")
	run := func(ns *netns.NS, args ...string) {
		t.Helper()
		if _, err := ns.Run(ctx, args[0], args[1:]...); err != nil {
			t.Fatal(err)
		}
	}
	run(h, "ip", "link", "add", "hin", "type", "veth", "peer", "name", "rin", "netns", r.Name)
	run(h, "ip", "link", "add", "hout", "type", "veth", "peer", "name", "rout", "netns", r.Name)
	for _, l := range []struct {
		ns   *netns.NS
		name string
	}{{h, "hin"}, {h, "hout"}, {r, "rin"}, {r, "rout"}} {
		run(l.ns, "sysctl", "-qw", "net.ipv6.conf."+l.name+".accept_dad=0")
		run(l.ns, "ip", "link", "set", l.name, "up")
	}
	if err := r.Sysctl("net.ipv6.conf.all.forwarding", "1"); err != nil {
		t.Fatal(err)
	}
	link := func(ns *netns.NS, name string) net.Interface {
		l, err := ns.Netlink().LinkByName(name)
		if err != nil {
			t.Fatal(err)
		}
		return net.Interface{Index: l.Attrs().Index, HardwareAddr: l.Attrs().HardwareAddr}
	}
	hout, hin, rin := link(h, "hout"), link(h, "hin"), link(r, "rin")
	run(r, "ip", "-6", "addr", "add", "fd00:2::1/64", "dev", "rout", "nodad")
	run(r, "ip", "-6", "neigh", "add", "fd00:2::2", "lladdr", hout.HardwareAddr.String(), "dev", "rout", "nud", "permanent")
	run(r, "ip", "-6", "route", "add", "fc00::/16", "via", "fd00:2::2", "dev", "rout")
	run(r, "ip", "-6", "route", "add", "fc00:2::e/128", "encap", "seg6local", "action", "End", "dev", "rin")
	// Head-end policies for TestHeadEndMatchesKernel, one destination each.
	if err := r.Sysctl("net.ipv4.conf.all.forwarding", "1"); err != nil {
		t.Fatal(err)
	}
	run(r, "ip", "sr", "tunsrc", "set", tunSrc.String())
	segs := "fc00:3::e,fc00:4::d6"
	run(r, "ip", "-6", "route", "add", "2001:db8:b::1/128", "encap", "seg6", "mode", "encap", "segs", segs, "dev", "rout")
	run(r, "ip", "-6", "route", "add", "2001:db8:b::2/128", "encap", "seg6", "mode", "inline", "segs", segs, "dev", "rout")
	run(r, "ip", "-6", "route", "add", "2001:db8:b::3/128", "encap", "seg6", "mode", "encap.red", "segs", segs, "dev", "rout")
	run(r, "ip", "route", "add", "198.51.100.7/32", "encap", "seg6", "mode", "encap", "segs", segs, "dev", "rout")
	run(r, "ip", "-6", "route", "add", "2001:db8:b::4/128", "encap", "seg6", "mode", "l2encap", "segs", segs, "dev", "rout")
	// NEXT-C-SID End for TestMutateEndCSIDMatchesKernel: block fc00:0:0::/48,
	// this node's 16-bit C-SID 0x0002.
	run(r, "ip", "-6", "route", "add", "fc00:0:0:2::/64", "encap", "seg6local", "action", "End",
		"flavors", "next-csid", "lblen", "48", "nflen", "16", "dev", "rin")

	lab := &endLab{h: h, txIdx: hin.Index, rinMAC: rin.HardwareAddr, srcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}}
	err := h.Do(func() error {
		var err error
		if lab.tx, err = packetSocket(hin.Index); err != nil {
			return err
		}
		lab.rx, err = packetSocket(hout.Index)
		return err
	})
	if err != nil {
		t.Fatalf("AF_PACKET sockets: %v", err)
	}
	t.Cleanup(func() { syscall.Close(lab.tx); syscall.Close(lab.rx) })
	return lab
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func packetSocket(ifindex int) (int, error) {
	fd, err := syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW, int(htons(syscall.ETH_P_ALL)))
	if err != nil {
		return -1, fmt.Errorf("open packet socket: %w", err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrLinklayer{Protocol: htons(syscall.ETH_P_ALL), Ifindex: ifindex}); err != nil {
		syscall.Close(fd)
		return -1, fmt.Errorf("bind packet socket: %w", err)
	}
	tv := syscall.Timeval{Usec: 50000}
	if err := syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv); err != nil {
		syscall.Close(fd)
		return -1, fmt.Errorf("set receive timeout: %w", err)
	}
	return fd, nil
}

func (l *endLab) send(t *testing.T, pkt []byte) { t.Helper(); l.sendEther(t, pkt) }

// sendEther sends an IPv4 or IPv6 packet to rin.
func (l *endLab) sendEther(t *testing.T, pkt []byte) {
	t.Helper()
	et := uint16(EtherTypeIPv6)
	if len(pkt) > 0 && pkt[0]>>4 == 4 {
		et = EtherTypeIPv4
	}
	frame := Ether(l.rinMAC, l.srcMAC, et, pkt)
	if _, err := syscall.Write(l.tx, frame); err != nil {
		t.Fatalf("send: %v", err)
	}
}

// collect reads IPv6 packets from the outer source tunSrc or hostA on hout
// for d (or until it has enough, when enough > 0), keyed by flow label.
func (l *endLab) collect(t *testing.T, d time.Duration, enough int) map[uint32][]byte {
	t.Helper()
	out := map[uint32][]byte{}
	buf := make([]byte, 4096)
	for end := time.Now().Add(d); time.Now().Before(end) && (enough == 0 || len(out) < enough); {
		n, from, err := syscall.Recvfrom(l.rx, buf, 0)
		if err != nil {
			continue // timeout tick
		}
		if ll, ok := from.(*syscall.SockaddrLinklayer); ok && ll.Pkttype == syscall.PACKET_OUTGOING {
			continue
		}
		if n < EthernetHeaderLen || binary.BigEndian.Uint16(buf[12:]) != EtherTypeIPv6 {
			continue
		}
		h, err := ParseIPv6(buf[EthernetHeaderLen:n])
		if err != nil || h.Src != tunSrc && h.Src != hostA {
			continue
		}
		out[h.FlowLabel] = slices.Clone(buf[EthernetHeaderLen:n])
	}
	return out
}

// TestHeadEndMatchesKernel compares Encap, EncapWith and Insert with the
// kernel's seg6 lwtunnel modes encap, encap.red and inline: the same inner
// packet in, the same bytes out (after the router's hop limit decrement).
func TestHeadEndMatchesKernel(t *testing.T) {
	testutil.RequireRoot(t)
	lab := newEndLab(t)
	travel := []netip.Addr{netip.MustParseAddr("fc00:3::e"), netip.MustParseAddr("fc00:4::d6")}
	flow := func(b []byte, tc uint8, fl uint32) []byte {
		binary.BigEndian.PutUint32(b, 6<<28|uint32(tc)<<20|fl)
		return b
	}
	hl := func(b []byte, v uint8) []byte { b[7] = v; return b }
	dec := func(b []byte) []byte { b[7]--; return b } // ip6_forward on the outer header
	must := func(b []byte, err error) []byte {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	inherit := EncapOptions{Inherit: true}
	cases := []struct {
		name string
		in   []byte
		want func(in []byte) []byte
	}{
		{"encap ipv6", hl(flow(UDP6(hostA, netip.MustParseAddr("2001:db8:b::1"), 1, 2, []byte("enc")), 0x20, 0x12345), 30),
			func(in []byte) []byte { return dec(must(EncapWith(inherit, tunSrc, travel, in))) }},
		{"encap ipv6 tcp", TCP6(hostA, netip.MustParseAddr("2001:db8:b::1"), 1, 2, TCPSyn, nil),
			func(in []byte) []byte { return dec(must(EncapWith(inherit, tunSrc, travel, in))) }},
		{"inline", flow(ICMP6Echo(hostA, netip.MustParseAddr("2001:db8:b::2"), 1, 2), 0, 0xabc),
			func(in []byte) []byte { return dec(must(Insert(in, travel))) }},
		{"encap.red", UDP6(hostA, netip.MustParseAddr("2001:db8:b::3"), 1, 2, []byte("red")),
			func(in []byte) []byte {
				return dec(must(EncapWith(EncapOptions{Inherit: true, ReducedSRH: true}, tunSrc, travel, in)))
			}},
		{"encap ipv4", UDP4(host4A, host4B, 1, 2, []byte("v4")),
			func(in []byte) []byte {
				return dec(must(EncapWith(EncapOptions{HopLimit: DefaultHopLimit}, tunSrc, travel, in)))
			}},
	}
	l2in := UDP6(hostA, netip.MustParseAddr("2001:db8:b::4"), 1, 2, []byte("l2"))
	cases = append(cases, struct {
		name string
		in   []byte
		want func(in []byte) []byte
	}{"l2encap", l2in, func(in []byte) []byte {
		// The frame as rin received it (MACs of the lab's sender).
		frame := Ether(lab.rinMAC, lab.srcMAC, EtherTypeIPv6, in)
		return dec(must(EncapL2(tunSrc, travel, frame)))
	}})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lab.sendEther(t, c.in)
			got := lab.collect(t, time.Second, 1)
			if len(got) != 1 {
				t.Fatalf("captured %d packets, want 1", len(got))
			}
			want := c.want(slices.Clone(c.in))
			for _, g := range got {
				mustEq(t, "kernel vs codec", g, want)
			}
		})
	}
}

// TestMutateEndCSIDMatchesKernel compares MutateEndCSID with the kernel's
// End with the NEXT-C-SID flavor (lblen 48, nflen 16).
func TestMutateEndCSIDMatchesKernel(t *testing.T) {
	testutil.RequireRoot(t)
	lab := newEndLab(t)
	block := netip.MustParsePrefix("fc00::/48")
	c1, _ := CSIDContainer(block, 2, 3, 4) // this node, then 3 and 4
	c2, _ := CSIDContainer(block, 5, 6)    // the next container
	last, _ := CSIDContainer(block, 2)     // argument exhausted: End to c2
	plain := func(dst netip.Addr) []byte { return UDP6(hostA, dst, 1, 2, []byte("csid")) }
	enc := func(travel ...netip.Addr) []byte {
		b, err := Encap(tunSrc, travel, plain(hostB))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	set := func(b []byte, off int, v byte) []byte { c := slices.Clone(b); c[off] = v; return c }
	cases := []struct {
		name string
		pkt  []byte
	}{
		{"shift without srh", plain(c1)},
		{"shift with srh", enc(c1, c2)},
		{"exhausted: end to next container", enc(last, c2)},
		{"exhausted without srh", plain(last)},
		{"exhausted, sl 0", set(enc(last, c2), IPv6HeaderLen+3, 0)},
		{"shift, hop limit 1", set(enc(c1, c2), 7, 1)},
		{"shift ignores a broken srh", set(enc(c1, c2), IPv6HeaderLen+2, 0)},
	}
	for i := range cases {
		binary.BigEndian.PutUint32(cases[i].pkt[0:4], 6<<28|uint32(i+1))
		lab.send(t, cases[i].pkt)
	}
	got := lab.collect(t, 500*time.Millisecond, 0)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want, merr := MutateEndCSID(c.pkt, 48, 16)
			kern, forwarded := got[uint32(i+1)]
			switch {
			case merr != nil && forwarded:
				t.Fatalf("model drops (%v), kernel forwards %x", merr, kern)
			case merr == nil && !forwarded:
				t.Fatalf("model forwards, kernel dropped")
			case merr == nil:
				mustEq(t, "kernel vs model", kern, want)
			default:
				t.Logf("both drop; model reason %v", Reason(merr))
			}
		})
	}
}
