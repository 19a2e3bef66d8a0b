package proxydp

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/srv6"
	"github.com/srchain/srchain/internal/testutil"
)

// TestEndADThroughNF proves End.AD end to end with a real NF: namespace
// A sends an SRv6 packet to the proxy SID on P; P strips it and sends
// the inner packet to namespace N, an ordinary Linux router (IPv6
// forwarding, no SRv6), which routes it back to P; P puts the cached
// header back (End done: SL - 1, DA = A's address) and forwards it to A,
// which must receive exactly the model's packet with the proxy's hop
// counted. Neighbour discovery between P and N crosses IFACE-IN and must
// keep working (the proxy passes it to the stack). The maps and links are
// pinned: after the loading Proxy is closed the datapath keeps working,
// and OpenPinned sees its counters.
func TestEndADThroughNF(t *testing.T) {
	throughNF(t, SID{Behavior: BehaviorAD, Inner: ProtoIPv6}, true)
}

// TestThroughNF is TestEndADThroughNF for the other behaviours (not
// pinned): End.AD.flow, End.AS (pushing a one-segment header: plain
// IPv6-in-IPv6 to A) and End.AM (the NF forwards the packet with its
// SRH, unprocessed, back to the proxy).
func TestThroughNF(t *testing.T) {
	for _, s := range []SID{
		{Behavior: BehaviorADFlow, Inner: ProtoIPv6, FlowTimeout: time.Minute},
		{Behavior: BehaviorAS, Inner: ProtoIPv6, Source: netip.MustParseAddr("fc00:a::1"), Segments: []netip.Addr{netip.MustParseAddr("fc00:a::2")}},
		{Behavior: BehaviorAM},
	} {
		t.Run(s.Behavior.String(), func(t *testing.T) { throughNF(t, s, false) })
	}
}

// topo is A -- P (proxy) -- N (NF): a0/p0 and p1/n0 veth pairs.
type topo struct {
	nsA, nsP, nsN  *netns.NS
	a0, p0, p1, n0 string
	p0i, p1i, a0i  int
	p0mac, a0mac   net.HardwareAddr
}

func (tp *topo) run(t *testing.T, ns *netns.NS, args ...string) {
	t.Helper()
	if _, err := ns.Run(t.Context(), args[0], args[1:]...); err != nil {
		t.Fatal(err)
	}
}

func newTopo(t *testing.T) *topo {
	t.Helper()
	testutil.RequireRoot(t)
	pid := os.Getpid() % 100000
	mk := func(role string) *netns.NS {
		name := fmt.Sprintf("srct-pxe-%s-%d", role, pid)
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
		return ns
	}
	tp := &topo{nsA: mk("a"), nsP: mk("p"), nsN: mk("n")}
	nsA, nsP, nsN := tp.nsA, tp.nsP, tp.nsN
	// veth pairs created in P, one end moved to A / N.
	link := func(local, peer string, peerNS *netns.NS) {
		if err := nsP.Netlink().LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: local}, PeerName: peer}); err != nil {
			t.Fatalf("add veth: %v", err)
		}
		l, err := nsP.Netlink().LinkByName(peer)
		if err != nil {
			t.Fatal(err)
		}
		if err := nsP.Netlink().LinkSetNsFd(l, int(peerNS.Handle())); err != nil {
			t.Fatal(err)
		}
	}
	tp.a0, tp.p0, tp.p1, tp.n0 = fmt.Sprintf("pxa%d", pid), fmt.Sprintf("pxp%d0", pid), fmt.Sprintf("pxp%d1", pid), fmt.Sprintf("pxn%d", pid)
	a0, p0, p1, n0 := tp.a0, tp.p0, tp.p1, tp.n0
	link(p0, a0, nsA)
	link(p1, n0, nsN)
	for _, c := range []struct {
		ns   *netns.NS
		args []string
	}{
		{nsA, []string{"ip", "link", "set", a0, "up"}},
		{nsA, []string{"ip", "-6", "addr", "add", "fc00:a::2/64", "dev", a0, "nodad"}},
		{nsP, []string{"ip", "link", "set", p0, "up"}},
		{nsP, []string{"ip", "link", "set", p1, "up"}},
		{nsP, []string{"ip", "-6", "addr", "add", "fc00:a::1/64", "dev", p0, "nodad"}},
		{nsP, []string{"ip", "-6", "addr", "add", "fc00:99::1/64", "dev", p1, "nodad"}},
		{nsN, []string{"ip", "link", "set", n0, "up"}},
		{nsN, []string{"ip", "-6", "addr", "add", "fc00:99::2/64", "dev", n0, "nodad"}},
		{nsN, []string{"ip", "-6", "route", "add", "2001:db8::/64", "via", "fc00:99::1", "dev", n0}},
		{nsN, []string{"ip", "-6", "route", "add", "fc00:a::/64", "via", "fc00:99::1", "dev", n0}}, // End.AM's DA
	} {
		tp.run(t, c.ns, c.args...)
	}
	for _, ns := range []*netns.NS{nsP, nsN} {
		if err := ns.Sysctl("net.ipv6.conf.all.forwarding", "1"); err != nil {
			t.Fatal(err)
		}
	}
	ifindex := func(ns *netns.NS, name string) (int, net.HardwareAddr) {
		l, err := ns.Netlink().LinkByName(name)
		if err != nil {
			t.Fatal(err)
		}
		return l.Attrs().Index, l.Attrs().HardwareAddr
	}
	tp.p0i, tp.p0mac = ifindex(nsP, p0)
	tp.p1i, _ = ifindex(nsP, p1)
	tp.a0i, tp.a0mac = ifindex(nsA, a0)
	return tp
}

func throughNF(t *testing.T, sid SID, pinned bool) {
	tp := newTopo(t)
	pid := os.Getpid() % 100000
	nsA, nsP := tp.nsA, tp.nsP
	p0i, p1i, a0i, p0mac, a0mac := tp.p0i, tp.p1i, tp.a0i, tp.p0mac, tp.a0mac
	pin, linkSR, linkNF := "", "", ""
	if pinned {
		pin = filepath.Join("/sys/fs/bpf", fmt.Sprintf("srchain-test-proxy-%d", pid))
		linkSR, linkNF = filepath.Join(pin, "link_sr"), filepath.Join(pin, "link_nf")
		os.RemoveAll(pin)
		t.Cleanup(func() {
			if err := Remove(pin); err != nil {
				t.Error(err)
			}
		})
	}
	p, err := Load(Options{PinPath: pin})
	if err != nil {
		t.Fatalf("%+v", err)
	}
	if !pinned {
		defer p.Close()
	}
	sid.Addr = netip.MustParseAddr("fc00:1::d6")
	sid.OutIfindex, sid.InIfindex = p1i, p1i
	sid.NFNext6 = netip.MustParseAddr("fc00:99::2")
	if err := p.SetSIDs([]SID{sid}); err != nil {
		t.Fatal(err)
	}
	if err := nsP.Do(func() error {
		if err := p.Attach(p0i, false, linkSR); err != nil {
			return err
		}
		return p.Attach(p1i, true, linkNF)
	}); err != nil {
		t.Fatal(err)
	}
	m, err := NewModel([]SID{sid})
	if err != nil {
		t.Fatal(err)
	}

	// A packet socket on A's interface: send the frame, read what comes back.
	var fd int
	if err := nsA.Do(func() error {
		var err error
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		tv := unix.Timeval{Usec: 200000}
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: a0i})
	}); err != nil {
		t.Fatalf("packet socket: %v", err)
	}
	defer unix.Close(fd)

	final := netip.MustParseAddr("fc00:a::2")
	roundTrip := func(sport uint16) {
		t.Helper()
		inner := srv6.UDP6(host6a, host6b, sport, 2000, []byte("through the nf"))
		l3, err := srv6.Encap(final, []netip.Addr{sid.Addr, final}, inner)
		if err != nil {
			t.Fatal(err)
		}
		toNF := m.FromSR(l3)
		back := m.FromNF(p1i, EtherIPv6, nfForward(toNF.Packet))
		if toNF.Verdict != ToNF || back.Verdict != Forward {
			t.Fatalf("model: %v then %v", toNF.Verdict, back.Verdict)
		}
		want := append([]byte(nil), back.Packet...)
		want[7]-- // the proxy is one hop (redirect or stack)
		frame := srv6.Ether(p0mac, a0mac, srv6.EtherTypeIPv6, l3)
		deadline := time.Now().Add(5 * time.Second)
		sent := time.Time{}
		buf := make([]byte, 4096)
		var other []byte
		for time.Now().Before(deadline) {
			if time.Since(sent) > time.Second { // again while neighbours resolve
				if err := unix.Sendto(fd, frame, 0, &unix.SockaddrLinklayer{Ifindex: a0i, Halen: 6, Addr: [8]byte(append(p0mac, 0, 0))}); err != nil {
					t.Fatalf("send: %v", err)
				}
				sent = time.Now()
			}
			n, from, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				continue
			}
			ll, ok := from.(*unix.SockaddrLinklayer)
			if !ok || ll.Pkttype == unix.PACKET_OUTGOING || n < ethLen+40 || binary.BigEndian.Uint16(buf[12:14]) != EtherIPv6 || buf[ethLen+6] == 58 {
				continue
			}
			if got := buf[ethLen:n]; !bytes.Equal(got, want) {
				other = append(other[:0], got...) // e.g. a copy of an earlier round trip's resend
				continue
			}
			return
		}
		t.Fatalf("the packet did not come back to A; last other SRv6 packet there:\n %x\nwant\n %x", other, want)
	}
	roundTrip(1000)
	c, err := p.Counters()
	if err != nil {
		t.Fatal(err)
	}
	pre := "sid/" + sid.Addr.String() + "/"
	hit := sid.Behavior != BehaviorAD && sid.Behavior != BehaviorADFlow || c[pre+"cache-hit"] >= 1
	if c[pre+"to-nf"] < 1 || !hit || c[pre+"control"] < 1 || c[pre+"from-nf"]+c[pre+"stack"] < 1 {
		t.Errorf("counters after one round trip: %v", c)
	}
	t.Logf("counters: %v", c)
	if !pinned {
		roundTrip(1001)
		return
	}

	// The loader goes away; the pinned datapath stays.
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	roundTrip(1001)
	q, err := OpenPinned(pin, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	c2, err := q.Counters()
	if err != nil {
		t.Fatal(err)
	}
	if c2[pre+"to-nf"] <= c[pre+"to-nf"] || c2[pre+"cache-hit"] <= c[pre+"cache-hit"] {
		t.Errorf("pinned counters did not move: before %v after %v", c, c2)
	}
}

func htons(v uint16) uint16 { return v>>8 | v<<8 }

// TestKernelEncapIPv4AS: IPv4 traffic that A's kernel encapsulates
// (seg6 encap route, so the skb carries the kernel's encapsulation
// marks across the veths) goes through End.AS with an IPv4 inner type:
// P strips it and sends the IPv4 packet to N (bpf_redirect_neigh to the
// NF's IPv4 address; ARP on IFACE-IN passes to P's stack), N routes it
// back, P decrements the TTL and pushes the static header (one segment:
// IPv4-in-IPv6 to A). A must receive exactly that header (hop limit 63:
// the proxy's hop) around its own datagram with TTL 62 (N and P) and a
// valid header checksum.
func TestKernelEncapIPv4AS(t *testing.T) {
	tp := newTopo(t)
	for _, c := range []struct {
		ns   *netns.NS
		args []string
	}{
		{tp.nsA, []string{"ip", "addr", "add", "10.1.0.1/24", "dev", tp.a0}},
		{tp.nsA, []string{"ip", "-6", "route", "add", "fc00:1::/64", "via", "fc00:a::1", "dev", tp.a0}},
		{tp.nsA, []string{"ip", "sr", "tunsrc", "set", "fc00:a::2"}},
		{tp.nsA, []string{"ip", "route", "add", "10.2.0.0/24", "encap", "seg6", "mode", "encap", "segs", "fc00:1::a4", "dev", tp.a0}},
		{tp.nsP, []string{"ip", "addr", "add", "10.99.0.1/24", "dev", tp.p1}},
		{tp.nsN, []string{"ip", "addr", "add", "10.99.0.2/24", "dev", tp.n0}},
		{tp.nsN, []string{"ip", "route", "add", "10.2.0.0/24", "via", "10.99.0.1", "dev", tp.n0}},
	} {
		tp.run(t, c.ns, c.args...)
	}
	if err := tp.nsN.Sysctl("net.ipv4.ip_forward", "1"); err != nil {
		t.Fatal(err)
	}
	p, err := Load(Options{})
	if err != nil {
		t.Fatalf("%+v", err)
	}
	defer p.Close()
	sid := SID{Addr: netip.MustParseAddr("fc00:1::a4"), Behavior: BehaviorAS, OutIfindex: tp.p1i, InIfindex: tp.p1i,
		NFNext4: netip.MustParseAddr("10.99.0.2"), Inner: ProtoIPv4,
		Source: netip.MustParseAddr("fc00:a::1"), Segments: []netip.Addr{netip.MustParseAddr("fc00:a::2")}}
	if err := p.SetSIDs([]SID{sid}); err != nil {
		t.Fatal(err)
	}
	if err := tp.nsP.Do(func() error {
		if err := p.Attach(tp.p0i, false, ""); err != nil {
			return err
		}
		return p.Attach(tp.p1i, true, "")
	}); err != nil {
		t.Fatal(err)
	}
	var fd int
	var conn net.Conn
	payload := []byte("kernel encapsulated")
	if err := tp.nsA.Do(func() error {
		var err error
		if fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL))); err != nil {
			return err
		}
		tv := unix.Timeval{Usec: 200000}
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return err
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: tp.a0i}); err != nil {
			return err
		}
		conn, err = net.Dial("udp4", "10.2.0.1:2000")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	defer conn.Close()
	hdr, err := sid.ASHeader()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	var sent time.Time
	for deadline := time.Now().Add(6 * time.Second); time.Now().Before(deadline); {
		if time.Since(sent) > 500*time.Millisecond {
			if _, err := conn.Write(payload); err != nil {
				t.Fatal(err)
			}
			sent = time.Now()
		}
		n, from, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			continue
		}
		ll, ok := from.(*unix.SockaddrLinklayer)
		f := buf[:n]
		if !ok || ll.Pkttype == unix.PACKET_OUTGOING || n < ethLen+60 || binary.BigEndian.Uint16(f[12:14]) != EtherIPv6 || f[ethLen+6] != ProtoIPv4 {
			continue
		}
		l3 := f[ethLen:]
		want := append([]byte(nil), hdr...)
		binary.BigEndian.PutUint16(want[4:6], uint16(len(l3)-40))
		want[7]--
		inner := l3[40:]
		if !bytes.Equal(l3[:40], want) || inner[8] != 62 || srv6.Checksum(inner[:20]) != 0 ||
			!bytes.Equal(inner[12:20], []byte{10, 1, 0, 1, 10, 2, 0, 1}) || !bytes.HasSuffix(inner, payload) {
			t.Fatalf("A received\n %x\nwant outer %x, inner TTL 62, valid checksum, 10.1.0.1 -> 10.2.0.1", l3, want)
		}
		c, err := p.Counters()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("counters: %v", c)
		return
	}
	c, _ := p.Counters()
	t.Fatalf("nothing came back to A; counters %v", c)
}

// TestL2ThroughBridge proves the Ethernet inner type end to end with a
// real L2 NF: N is a Linux bridge between two arms (IFACE-OUT p1/n0 and
// IFACE-IN p2/n1); A sends H.Encaps.L2 packets (an IPv4 frame, then an
// ARP broadcast) to P's End.AD SID; P strips them, the bridge floods the
// frame from one arm to the other, and P puts the cached header back and
// forwards the packet to A, which must receive the model's packet with
// the frame inside, byte for byte. Then the same with both XDP twins
// attached, which must serve the frames themselves (tc's from-nf stays).
func TestL2ThroughBridge(t *testing.T) {
	tp := newTopo(t)
	pid := os.Getpid() % 100000
	nsA, nsP, nsN := tp.nsA, tp.nsP, tp.nsN
	p2, n1 := fmt.Sprintf("pxq%d", pid), fmt.Sprintf("pxm%d", pid)
	if err := nsP.Netlink().LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: p2}, PeerName: n1}); err != nil {
		t.Fatal(err)
	}
	l, err := nsP.Netlink().LinkByName(n1)
	if err != nil {
		t.Fatal(err)
	}
	if err := nsP.Netlink().LinkSetNsFd(l, int(nsN.Handle())); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ns   *netns.NS
		args []string
	}{
		{nsP, []string{"ip", "link", "set", p2, "up"}},
		{nsN, []string{"ip", "link", "add", "br0", "type", "bridge"}},
		{nsN, []string{"ip", "link", "set", tp.n0, "master", "br0"}},
		{nsN, []string{"ip", "link", "set", n1, "master", "br0"}},
		{nsN, []string{"ip", "link", "set", n1, "up"}},
		// A pure L2 service: no IPv6 of their own on the NF's arms nor on
		// the proxy's IFACE-OUT and IFACE-IN (what the router's own stack
		// sends out of IFACE-OUT would come back bridged on IFACE-IN and
		// be carried as the chain's, docs/proxy.md).
		{nsN, []string{"sysctl", "-qw", "net.ipv6.conf.br0.disable_ipv6=1", "net.ipv6.conf." + tp.n0 + ".disable_ipv6=1", "net.ipv6.conf." + n1 + ".disable_ipv6=1"}},
		{nsP, []string{"sysctl", "-qw", "net.ipv6.conf." + tp.p1 + ".disable_ipv6=1", "net.ipv6.conf." + p2 + ".disable_ipv6=1"}},
		{nsN, []string{"ip", "link", "set", "br0", "up"}},
		{nsP, []string{"ping", "-6", "-c", "1", "-W", "2", "fc00:a::2"}}, // P resolves A (L2 frames are never handed to the stack)
	} {
		tp.run(t, c.ns, c.args...)
	}
	l, err = nsP.Netlink().LinkByName(p2)
	if err != nil {
		t.Fatal(err)
	}
	p2i := l.Attrs().Index
	p, err := Load(Options{})
	if err != nil {
		t.Fatalf("%+v", err)
	}
	defer p.Close()
	sid := SID{Addr: netip.MustParseAddr("fc00:1::d2"), Behavior: BehaviorAD, OutIfindex: tp.p1i, InIfindex: p2i, Inner: ProtoEthernet}
	if err := p.SetSIDs([]SID{sid}); err != nil {
		t.Fatal(err)
	}
	if err := nsP.Do(func() error {
		if err := p.Attach(tp.p0i, false, ""); err != nil {
			return err
		}
		return p.Attach(p2i, true, "")
	}); err != nil {
		t.Fatal(err)
	}
	m, err := NewModel([]SID{sid})
	if err != nil {
		t.Fatal(err)
	}
	var fd int
	if err := nsA.Do(func() error {
		var err error
		if fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL))); err != nil {
			return err
		}
		tv := unix.Timeval{Usec: 200000}
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: tp.a0i})
	}); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	final := netip.MustParseAddr("fc00:a::2")
	roundTrip := func(name string, inner []byte) {
		t.Helper()
		l3, err := srv6.EncapL2(final, []netip.Addr{sid.Addr, final}, inner)
		if err != nil {
			t.Fatal(err)
		}
		toNF := m.FromSR(l3)
		back := m.FromNFL2(p2i, toNF.Packet)
		if toNF.Verdict != ToNF || back.Verdict != Forward {
			t.Fatalf("%s: model %v then %v", name, toNF.Verdict, back.Verdict)
		}
		want := append([]byte(nil), back.Packet...)
		want[7]--
		frame := srv6.Ether(tp.p0mac, tp.a0mac, srv6.EtherTypeIPv6, l3)
		if err := unix.Sendto(fd, frame, 0, &unix.SockaddrLinklayer{Ifindex: tp.a0i, Halen: 6, Addr: [8]byte(append(tp.p0mac, 0, 0))}); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4096)
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
			n, from, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				continue
			}
			if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype != unix.PACKET_OUTGOING && n > ethLen && bytes.Equal(buf[ethLen:n], want) {
				return
			}
		}
		t.Fatalf("%s: the frame did not come back to A inside the restored header", name)
	}
	ipFrame := srv6.Ether(l2B, l2A, EtherIPv4, udp4(64, 9))
	roundTrip("ipv4 frame", ipFrame)
	roundTrip("arp broadcast", arpFrame())
	c, err := p.Counters()
	if err != nil {
		t.Fatal(err)
	}
	pre := "sid/" + sid.Addr.String() + "/"
	// from-nf may count a frame more: what a stack in the line still
	// sends through the bridge (the round trips themselves are checked
	// byte for byte above).
	if c[pre+"to-nf"] != 2 || c[pre+"from-nf"] < 2 || c[pre+"cache-hit"] < 2 {
		t.Errorf("counters at tc: %v", c)
	}
	// Both XDP twins, and the tc programs detached: the twins alone serve
	// the frames. A veth takes frames redirected at XDP only with NAPI on
	// its peer (GRO, or an XDP program there).
	tp.run(t, nsN, "ethtool", "-K", tp.n0, "gro", "on")
	tp.run(t, nsA, "ethtool", "-K", tp.a0, "gro", "on")
	if err := nsP.Do(func() error {
		if err := p.AttachXDP(tp.p0i, false, ""); err != nil {
			return err
		}
		if err := p.AttachXDP(p2i, true, ""); err != nil {
			return err
		}
		if err := p.Detach(tp.p0i, false, ""); err != nil {
			return err
		}
		return p.Detach(p2i, true, "")
	}); err != nil {
		t.Fatal(err)
	}
	roundTrip("ipv4 frame at xdp", srv6.Ether(l2B, l2A, EtherIPv4, udp4(64, 10)))
	roundTrip("arp broadcast at xdp", arpFrame())
	if c, err = p.Counters(); err != nil {
		t.Fatal(err)
	}
	if c[pre+"to-nf"] != 4 || c[pre+"from-nf"] < 4 {
		t.Errorf("counters after xdp: %v", c)
	}
	t.Logf("counters: %v", c)
}
