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

func throughNF(t *testing.T, sid SID, pinned bool) {
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
	nsA, nsP, nsN := mk("a"), mk("p"), mk("n")
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
	a0, p0, p1, n0 := fmt.Sprintf("pxa%d", pid), fmt.Sprintf("pxp%d0", pid), fmt.Sprintf("pxp%d1", pid), fmt.Sprintf("pxn%d", pid)
	link(p0, a0, nsA)
	link(p1, n0, nsN)
	run := func(ns *netns.NS, args ...string) {
		t.Helper()
		if _, err := ns.Run(t.Context(), args[0], args[1:]...); err != nil {
			t.Fatal(err)
		}
	}
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
		run(c.ns, c.args...)
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
	p0i, p0mac := ifindex(nsP, p0)
	p1i, _ := ifindex(nsP, p1)
	a0i, a0mac := ifindex(nsA, a0)

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
	q, err := OpenPinned(pin)
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
