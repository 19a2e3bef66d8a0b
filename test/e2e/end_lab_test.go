package e2e

import (
	"context"
	"errors"
	"fmt"
	"github.com/srchain/srchain/internal/testutil"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/srchain/srchain/internal/netns"
)

// endLine is one sender -> endpoint -> receiver line of three namespaces.
// Both lines of the differential test are built identically (same names
// inside the namespaces, same addresses, same MACs), so frames leaving the
// two endpoints can be compared byte for byte.
type endLine struct {
	tag       string
	s, e, r   *netns.NS
	sIf, rIf  int // sender's and receiver's interface (in their namespaces)
	eIn, eOut int // endpoint's interfaces towards sender and receiver
	eInName   string
	tx, rx    int // AF_PACKET sockets: sender's (send), receiver's (capture)
}

var (
	endMACs = Addrs{
		sIf:  net.HardwareAddr{0x02, 0, 0, 0, 1, 1},
		eIn:  net.HardwareAddr{0x02, 0, 0, 0, 1, 2},
		eOut: net.HardwareAddr{0x02, 0, 0, 0, 2, 1},
		rIf:  net.HardwareAddr{0x02, 0, 0, 0, 2, 2},
	}
	endSrc     = netip.MustParseAddr("fc00:a::1") // sender
	endRecv    = netip.MustParseAddr("fc00:b::2") // receiver, next hop of fc00:2::/64
	endSID     = netip.MustParseAddr("fc00:1::1")
	endNext    = netip.MustParseAddr("fc00:2::5")
	endNext2   = netip.MustParseAddr("fc00:2::6")
	endNonSID  = netip.MustParseAddr("fc00:2::7")
	endSIDX    = netip.MustParseAddr("fc00:1::2") // End.X nh6 endRecv
	endNoRoute = netip.MustParseAddr("fc00:9::1")
	// How long a dropped packet is waited for (forwarded ones return as
	// soon as they arrived and the line is quiet for 50 ms).
	endTimeout = 700 * time.Millisecond
)

// Addrs names the four MACs of a line.
type Addrs struct{ sIf, eIn, eOut, rIf net.HardwareAddr }

func endRequireRoot(t *testing.T) {
	t.Helper()
	testutil.RequireRoot(t)
}

// newEndLine builds the line srct-e-<pid>-<tag>{s,e,r}. The endpoint
// forwards IPv6, routes fc00:2::/64 to the receiver with a permanent
// neighbour entry (no neighbour discovery timing in the comparison).
func newEndLine(t *testing.T, tag string) *endLine {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	l := &endLine{tag: tag, tx: -1, rx: -1}
	mk := func(role string) *netns.NS {
		name := fmt.Sprintf("srct-e-%d-%s%s", os.Getpid(), tag, role)
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
	l.s, l.e, l.r = mk("s"), mk("e"), mk("r")
	// Interface names are per namespace, so both lines use the same ones.
	l.sIf = endVeth(t, l.s, endIf("s0"), endMACs.sIf, l.e, endIf("e0"), endMACs.eIn)
	l.rIf = endVeth(t, l.r, endIf("r0"), endMACs.rIf, l.e, endIf("e1"), endMACs.eOut)
	l.eInName = endIf("e0")
	for name, ifindex := range map[string]*int{endIf("e0"): &l.eIn, endIf("e1"): &l.eOut} {
		link, err := l.e.Netlink().LinkByName(name)
		if err != nil {
			t.Fatal(err)
		}
		*ifindex = link.Attrs().Index
	}
	for _, ns := range []*netns.NS{l.s, l.e, l.r} {
		// No router solicitations, MLD reports or DAD in the captures.
		for _, k := range []string{"net.ipv6.conf.all.accept_ra", "net.ipv6.conf.default.accept_ra"} {
			_ = ns.Sysctl(k, "0")
		}
	}
	if err := l.e.Sysctl("net.ipv6.conf.all.forwarding", "1"); err != nil {
		t.Fatal(err)
	}
	// Every ICMPv6 error the endpoint owes is sent (no rate limit), so
	// the lines can be compared by what their senders get back.
	if err := l.e.Sysctl("net.ipv6.icmp.ratelimit", "0"); err != nil {
		t.Fatal(err)
	}
	run := func(ns *netns.NS, args ...string) {
		t.Helper()
		if _, err := ns.Run(ctx, "ip", args...); err != nil {
			t.Fatal(err)
		}
	}
	run(l.s, "-6", "addr", "add", "fc00:a::1/64", "dev", endIf("s0"), "nodad")
	run(l.e, "-6", "addr", "add", "fc00:a::2/64", "dev", endIf("e0"), "nodad")
	run(l.e, "-6", "addr", "add", "fc00:b::1/64", "dev", endIf("e1"), "nodad")
	run(l.r, "-6", "addr", "add", "fc00:b::2/64", "dev", endIf("r0"), "nodad")
	run(l.e, "-6", "neigh", "replace", endRecv.String(), "lladdr", endMACs.rIf.String(), "dev", endIf("e1"), "nud", "permanent")
	run(l.e, "-6", "neigh", "replace", endSrc.String(), "lladdr", endMACs.sIf.String(), "dev", endIf("e0"), "nud", "permanent")
	run(l.e, "-6", "route", "add", "fc00:2::/64", "via", endRecv.String(), "dev", endIf("e1"))
	run(l.s, "-6", "route", "add", "default", "via", "fc00:a::2", "dev", endIf("s0"))

	var err error
	if l.tx, err = endPacketSocket(l.s, l.sIf); err != nil {
		t.Fatal(err)
	}
	if l.rx, err = endPacketSocket(l.r, l.rIf); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(l.tx); unix.Close(l.rx) })
	return l
}

// endVeth makes a veth pair a (in ns na) <-> b (in nb) with fixed MACs,
// both up, and returns a's ifindex.
func endVeth(t *testing.T, na *netns.NS, a string, maca net.HardwareAddr, nb *netns.NS, b string, macb net.HardwareAddr) int {
	t.Helper()
	v := &netlink.Veth{
		LinkAttrs:        netlink.LinkAttrs{Name: a, HardwareAddr: maca},
		PeerName:         b,
		PeerHardwareAddr: macb,
		PeerNamespace:    netlink.NsFd(int(nb.Handle())),
	}
	if err := na.Netlink().LinkAdd(v); err != nil {
		t.Fatalf("add veth %s/%s: %v", a, b, err)
	}
	for _, side := range []struct {
		ns   *netns.NS
		name string
	}{{na, a}, {nb, b}} {
		link, err := side.ns.Netlink().LinkByName(side.name)
		if err != nil {
			t.Fatal(err)
		}
		if err := side.ns.Netlink().LinkSetUp(link); err != nil {
			t.Fatal(err)
		}
	}
	link, err := na.Netlink().LinkByName(a)
	if err != nil {
		t.Fatal(err)
	}
	return link.Attrs().Index
}

// endIf is an interface name: the test prefix, the PID, a role (<= 15 bytes).
func endIf(role string) string { return fmt.Sprintf("srcte%d%s", os.Getpid(), role) }

func endHtons(v uint16) uint16 { return v<<8 | v>>8 }

// endPacketSocket opens an AF_PACKET socket bound to ifindex inside ns.
func endPacketSocket(ns *netns.NS, ifindex int) (int, error) {
	fd := -1
	err := ns.Do(func() error {
		s, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(endHtons(unix.ETH_P_ALL)))
		if err != nil {
			return fmt.Errorf("open packet socket: %w", err)
		}
		if err := unix.Bind(s, &unix.SockaddrLinklayer{Protocol: endHtons(unix.ETH_P_ALL), Ifindex: ifindex}); err != nil {
			unix.Close(s)
			return fmt.Errorf("bind packet socket: %w", err)
		}
		tv := unix.NsecToTimeval((20 * time.Millisecond).Nanoseconds())
		if err := unix.SetsockoptTimeval(s, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			unix.Close(s)
			return fmt.Errorf("set receive timeout: %w", err)
		}
		fd = s
		return nil
	})
	return fd, err
}

// send writes one Ethernet frame out of the sender's interface.
func (l *endLine) send(frame []byte) error {
	if _, err := unix.Write(l.tx, frame); err != nil {
		return fmt.Errorf("send on line %s: %w", l.tag, err)
	}
	return nil
}

// isOurs reports whether a captured frame is one of the test's packets:
// IPv6 from the sender's address (ignores anything the nodes emit).
func isOurs(frame []byte) bool {
	if len(frame) < 14+40 || frame[12] != 0x86 || frame[13] != 0xdd {
		return false
	}
	src := endSrc.As16()
	return string(frame[14+8:14+24]) == string(src[:])
}

// drain discards whatever the receiver socket holds.
func (l *endLine) drain() {
	buf := make([]byte, 4096)
	for {
		n, _, err := unix.Recvfrom(l.rx, buf, unix.MSG_DONTWAIT)
		if err != nil || n <= 0 {
			return
		}
	}
}

// receive returns the test frames queued at the receiver or arriving
// until one has arrived and a short quiet period passed, or until
// deadline (the queued ones are read even when deadline has passed: the
// lines are read one after the other with one deadline).
func (l *endLine) receive(deadline time.Time) [][]byte {
	return l.receiveWhere(deadline, isOurs)
}

// receiveWhere is receive for the frames keep accepts.
func (l *endLine) receiveWhere(deadline time.Time, keep func([]byte) bool) [][]byte {
	var got [][]byte
	buf := make([]byte, 65536)
	quietUntil := time.Time{}
	queued := true
	for queued || time.Now().Before(deadline) && (quietUntil.IsZero() || time.Now().Before(quietUntil)) {
		flags := 0
		if queued {
			flags = unix.MSG_DONTWAIT
		}
		n, from, err := unix.Recvfrom(l.rx, buf, flags)
		if queued && errors.Is(err, unix.EAGAIN) {
			queued = false
			continue
		}
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return got
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		if keep(buf[:n]) {
			got = append(got, append([]byte(nil), buf[:n]...))
			quietUntil = time.Now().Add(50 * time.Millisecond)
		}
	}
	return got
}

// drainSender discards what the sender's socket holds (its own frames and
// anything sent back to it).
func (l *endLine) drainSender() {
	buf := make([]byte, 4096)
	for {
		n, _, err := unix.Recvfrom(l.tx, buf, unix.MSG_DONTWAIT)
		if err != nil || n <= 0 {
			return
		}
	}
}

// receiveICMP returns the ICMPv6 error messages (types < 128) addressed to
// the sender that are queued on its interface or arrive until deadline;
// with stopAtFirst it returns once one arrived and 50 ms passed quietly.
func (l *endLine) receiveICMP(deadline time.Time, stopAtFirst bool) [][]byte {
	var got [][]byte
	buf := make([]byte, 65536)
	src := endSrc.As16()
	quietUntil := time.Time{}
	queued := true // first read what is queued, without waiting
	for queued || time.Now().Before(deadline) && (quietUntil.IsZero() || time.Now().Before(quietUntil)) {
		flags := 0
		if queued {
			flags = unix.MSG_DONTWAIT
		}
		n, from, err := unix.Recvfrom(l.tx, buf, flags)
		if queued && errors.Is(err, unix.EAGAIN) {
			queued = false
			continue
		}
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return got
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		f := buf[:n]
		if len(f) < 14+40+1 || f[12] != 0x86 || f[13] != 0xdd || f[14+6] != 58 ||
			string(f[14+24:14+40]) != string(src[:]) || f[14+40] >= 128 {
			continue
		}
		got = append(got, append([]byte(nil), f...))
		if stopAtFirst {
			quietUntil = time.Now().Add(50 * time.Millisecond)
		}
	}
	return got
}
