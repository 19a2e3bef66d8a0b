package e2e

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/srchain/srchain/internal/apply"
	"github.com/srchain/srchain/internal/compile"
	"github.com/srchain/srchain/internal/drop"
	"github.com/srchain/srchain/internal/lab"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/opot"
	"github.com/srchain/srchain/internal/opotdp"
	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/srv6"
	"github.com/srchain/srchain/internal/state"
)

// TestLabOPoT deploys examples/opot-testbed.yaml (seed 003 Fig. 7a,
// chain (r2, r3, r6), opot: true) with the kernel's End on r2 and r3:
// the probes verify at r6 with no drop; then, in the lab, packets made
// from a captured legitimate one are injected on the wire: r2 skipped
// (the headend's packet sent from r1 straight to r3's SID), r2 and r3
// swapped (its segment list reordered), a forged TLV
// injected between r2 and r3, a replay of a verified packet, RND and CML
// bit flips. Each is dropped at r6 and counted with its reason, the
// verifier's events name them, and legitimate traffic still verifies.
func TestLabOPoT(t *testing.T) {
	requireRoot(t)
	l := deployExample(t, "opot-testbed.yaml", "")
	opotScenario(t, l)
}

// TestLabOPoTEBPFEnd is TestLabOPoT with srchain's eBPF End on r2 and
// r3: their transits are done inside the End program (docs/opot.md
// "Transit in the End"), so their tcx ingress runs the End alone, no
// OPoT stage, and every proof the verifier accepts was updated by the
// End (the End counts the chain's packets).
func TestLabOPoTEBPFEnd(t *testing.T) {
	requireRoot(t)
	l := deployExample(t, "opot-testbed.yaml", spec.DatapathEBPF, "r2", "r3")
	for _, n := range []string{"r2", "r3"} {
		ns := l.node(t, n)
		progs, err := apply.IngressPrograms(ns, "eth0")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(progs, []string{"srchain_end"}) {
			t.Fatalf("%s eth0 tcx ingress runs %v: want srchain_end alone (the transit in it)", n, progs)
		}
	}
	opotScenario(t, l)
	for _, n := range []string{"r2", "r3"} {
		if sid, fib := l.endCounters(t, n, "sid/fd00:"); sid == 0 || fib == 0 {
			t.Errorf("%s's eBPF End saw %d SID packets, %d FIB lookups: it forwarded none of the chain's packets", n, sid, fib)
		}
	}
}

// TestLabOPoTXDP is the testbed with `datapath: xdp` on r2, r3 (the
// transits) and r6 (the verifier). r2 and r3 update the proof in their
// XDP End as it redirects (and their tc End for what XDP hands to the
// stack): their pipelines have no OPoT stage. r6 runs its verify stage
// at XDP, in the node's pipeline in front of the XDP End, and marks what
// it did so the tc stage behind leaves it alone (a second check would
// call every packet a replay). The probes and 50 more packets all
// verify at r6, with no drop; r2 and r3 redirect at XDP, and r6's
// pipeline opot stage hands the chain's packets on. The tamper classes are TestLabOPoT's:
// the captures they start from are not seen where XDP redirects, and
// the checks are the same code at tc and at XDP (TestXDPStage).
func TestLabOPoTXDP(t *testing.T) {
	requireRoot(t)
	l := deployExample(t, "opot-testbed.yaml", spec.DatapathXDP, "r2", "r3", "r6")
	red := map[string]uint64{}
	for _, n := range []string{"r2", "r3"} {
		red[n] = l.xdpRedirects(t, n)
	}
	l.probeAll(t)
	verified, drops := l.opotCounters(t)
	if verified == 0 || len(drops) != 0 {
		t.Fatalf("after the probes: %d verified, drops %v; want > 0 and none", verified, drops)
	}
	h1 := l.node(t, "h1")
	for i := range 50 {
		sendUDP(t, h1, netip.MustParseAddr("fc00:8::2"), fmt.Sprintf("opot-xdp-%d", i))
	}
	if !waitFor(func() bool { n, _ := l.opotCounters(t); return n >= verified+50 }) {
		n, d := l.opotCounters(t)
		t.Fatalf("50 packets: %d verified (was %d), drops %v", n, verified, d)
	}
	if n, d := l.opotCounters(t); n != verified+50 || len(d) != 0 {
		t.Fatalf("50 packets: %d verified (was %d), drops %v", n, verified, d)
	}
	if evs := l.opotEvents(t); len(evs) != 0 {
		t.Fatalf("events: %v", evs)
	}
	for _, n := range []string{"r2", "r3"} {
		if got := l.xdpRedirects(t, n); got <= red[n] {
			t.Errorf("%s: no XDP redirect (%d before, %d after)", n, red[n], got)
		}
	}
	for _, n := range []string{"r2", "r3"} {
		if pc := l.pipelineCounters(t, n); pc["stage/opot/next"] != 0 {
			t.Errorf("%s: an XDP pipeline opot stage ran (%v): the transit belongs in the End", n, pc)
		}
	}
	if next := l.pipelineCounters(t, "r6")["stage/opot/next"]; next < 50 {
		t.Errorf("r6: the XDP pipeline's opot stage handed %d packets on, want >= 50", next)
	}
}

// programCounter reads counter name of node's program of kind prog
// (logging the node's counters when it is 0).
func (l *exampleLab) programCounter(t *testing.T, node, prog, name string) uint64 {
	t.Helper()
	pcs, err := lab.Counters(t.Context(), l.net.Name, node, l.opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, pc := range pcs {
		for _, c := range pc.Counters {
			if pc.Program == prog && c.Name == name && c.Value > 0 {
				return c.Value
			}
		}
	}
	var out strings.Builder
	lab.PrintCounters(&out, pcs)
	t.Logf("%s counters:\n%s", node, out.String())
	return 0
}

// TestLabOPoTEBPFIngress is TestLabOPoT with srchain's eBPF ingress on
// r1, at XDP and tc (`ingress: ebpf, datapath: xdp`): the ingress writes
// the TLV as it encapsulates, from the OPoT driver's own maps (its
// sequence counter, its parameters), and the tc headend stage behind it
// leaves those packets alone (a second TLV would fail at r6). r1's OPoT
// program has only the egress headend stage, so its ingress runs at XDP
// (the veths count XDP redirects).
func TestLabOPoTEBPFIngress(t *testing.T) {
	requireRoot(t)
	l := deploySpec(t, opotEBPFIngressSpec(t))
	opotScenario(t, l)
	if n := l.xdpRedirects(t, "r1"); n == 0 {
		t.Error("r1's XDP ingress redirected nothing: the proofs were all written at tc")
	}
	if l.programCounter(t, "r1", state.ProgramIngress, "chain/verified/packets") == 0 {
		t.Fatal("r1's eBPF ingress encapsulated none of the chain's packets")
	}
}

// opotEBPFIngressSpec is examples/opot-testbed.yaml with r1 at
// `ingress: ebpf, datapath: xdp`.
func opotEBPFIngressSpec(t *testing.T) *spec.Spec {
	t.Helper()
	path := filepath.Join("..", "..", "examples", "opot-testbed.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const old = `{name: r1, role: router, locator: "fd00:1::/64"}`
	if !strings.Contains(string(b), old) {
		t.Fatal("opot-testbed.yaml changed: no r1 line")
	}
	src := strings.Replace(string(b), old, `{name: r1, role: router, locator: "fd00:1::/64", ingress: ebpf, datapath: xdp}`, 1)
	s, err := spec.Check([]byte(src), path)
	if err != nil {
		t.Fatalf("spec: %v", err)
	}
	return s
}

func index(s []string, prefix string) int {
	for i, v := range s {
		if strings.HasPrefix(v, prefix) {
			return i
		}
	}
	return -1
}

func opotScenario(t *testing.T, l *exampleLab) {
	l.probeAll(t)
	verified, drops := l.opotCounters(t)
	if verified == 0 || len(drops) != 0 {
		t.Fatalf("after the probes: %d verified, drops %v; want > 0 and none", verified, drops)
	}
	if evs := l.opotEvents(t); len(evs) != 0 {
		t.Fatalf("events without tampering: %v", evs)
	}

	// One legitimate packet, captured as it arrives at r2 (from the
	// headend), at r3 (from r2) and at r6 (from r3), before any tc stage.
	r1, r2, r3, r6 := l.node(t, "r1"), l.node(t, "r2"), l.node(t, "r3"), l.node(t, "r6")
	c2, c3, c6 := openRing(t, r2, "eth0"), openRing(t, r3, "eth0"), openRing(t, r6, "eth0")
	sendUDP(t, l.node(t, "h1"), netip.MustParseAddr("fc00:8::2"), "opot-e2e")
	sid2, sid3, sid6 := l.chainSIDs(t)
	atR2 := c2.capture(t, sid2)
	atR3 := c3.capture(t, sid3)
	atR6 := c6.capture(t, sid6)
	if got, _ := l.opotCounters(t); got != verified+1 {
		t.Fatalf("the captured packet: %d verified, want %d", got, verified+1)
	}
	for _, f := range [][]byte{atR2, atR3, atR6} {
		if _, err := tlvOffset(f); err != nil {
			t.Fatalf("captured frame: %v", err)
		}
	}
	tx1, tx2, tx3 := openRaw(t, r1, "eth1"), openRaw(t, r2, "eth1"), openRaw(t, r3, "eth1")

	type tamper struct {
		name   string
		frame  []byte
		via    *rawSock
		reason drop.Reason
	}
	// Skip r2: the headend's packet with DA = r3's SID, SL 1, sent from
	// r1 to r2, which only routes it on (its transit stage and End are
	// for r2's SID).
	skip := clone(atR2)
	setDA(skip, sid3)
	skip[ethLen+40+3] = 1
	// r2 and r3 swapped: the headend's packet with the segment list
	// (r3, r2, r6), sent from r1: r2 routes it to r3, whose End sends it
	// back to r2, then on to r6; both transits run, in the wrong order.
	swap := clone(atR2)
	seg := ethLen + 40 + 8
	s1, s2 := clone(swap[seg+16:seg+32]), clone(swap[seg+32:seg+48])
	copy(swap[seg+16:], s2)
	copy(swap[seg+32:], s1)
	setDA(swap, sid3)
	// A forged TLV injected on the r2 -> r3 link.
	forged := clone(atR3)
	off, _ := tlvOffset(forged)
	binary.BigEndian.PutUint64(forged[off+8:], 0x0123456789abcdef)
	binary.BigEndian.PutUint64(forged[off+16:], 0x0fedcba987654321)
	flipRND, flipCML := clone(atR6), clone(atR6)
	off, _ = tlvOffset(flipRND)
	flipRND[off+8+7] ^= 0x01
	flipCML[off+16+3] ^= 0x10
	cases := []tamper{
		{"skip r2", skip, tx1, drop.OPoTVerify},
		{"r2 and r3 swapped", swap, tx1, drop.OPoTVerify},
		{"forged TLV between r2 and r3", forged, tx2, drop.OPoTVerify},
		{"replay", clone(atR6), tx3, drop.OPoTReplay},
		{"RND bit flip", flipRND, tx3, drop.OPoTVerify},
		{"CML bit flip", flipCML, tx3, drop.OPoTVerify},
	}
	want := map[string]uint64{}
	for _, c := range cases {
		before := l.opotDrop(t, c.reason)
		c.via.send(t, c.frame)
		if !waitFor(func() bool { return l.opotDrop(t, c.reason) == before+1 }) {
			v, d := l.opotCounters(t)
			t.Errorf("%s: drop/%s %d, want %d (verified %d, drops %v)", c.name, c.reason, l.opotDrop(t, c.reason), before+1, v, d)
		}
		want[c.reason.String()]++
	}
	v, d := l.opotCounters(t)
	if v != verified+1 || fmt.Sprint(d) != fmt.Sprint(want) {
		t.Errorf("after tampering: %d verified, drops %v; want %d, %v", v, d, verified+1, want)
	}
	// Each drop has its event at r6, with the sequence number for the
	// replay (its proof held).
	evs := l.opotEvents(t)
	got := map[string]uint64{}
	for _, e := range evs {
		got[e.Reason]++
		if e.Subject != "chain/verified" || e.Node != "r6" {
			t.Errorf("event %+v: want chain/verified at r6", e)
		}
		if e.Reason == drop.OPoTReplay.String() && !strings.Contains(e.Detail, "seq ") {
			t.Errorf("replay event %+v has no sequence number", e)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events %v, want %v", got, want)
	}
	// Legitimate traffic still flows and verifies.
	l.probeAll(t)
	v2, d2 := l.opotCounters(t)
	if v2 <= v || fmt.Sprint(d2) != fmt.Sprint(want) {
		t.Errorf("after tampering, probes: %d verified (was %d), drops %v (want %v)", v2, v, d2, want)
	}
	t.Logf("r6: %d verified, drops %v, %d events", v2, d2, len(evs))

	// `lab apply FILE` with the same spec: the compile draws new keys,
	// the lab keeps the running ones (compile.KeepOPoTKeys), so no node
	// changes and traffic keeps verifying without a drop.
	l.reapplySame(t)
	l.probeAll(t)
	if v3, d3 := l.opotCounters(t); v3 <= v2 || fmt.Sprint(d3) != fmt.Sprint(want) {
		t.Errorf("after re-applying the spec: %d verified (was %d), drops %v (want %v)", v3, v2, d3, want)
	}
}

// reapplySame is `lab apply FILE` with the lab's own spec: a fresh
// compile (new OPoT keys drawn) that must change nothing on any node.
func (l *exampleLab) reapplySame(t *testing.T) {
	t.Helper()
	again, err := compile.Compile(l.s)
	if err != nil {
		t.Fatal(err)
	}
	again.Name = l.net.Name
	changes, err := lab.Update(t.Context(), again, lab.UpOptions{Options: l.opts})
	if err != nil {
		t.Fatalf("lab apply with the same spec: %v", err)
	}
	for n, c := range changes {
		if c != 0 {
			t.Errorf("lab apply with the same spec: %s made %d changes, want 0 (keys or slot regenerated?)", n, c)
		}
	}
}

const ethLen = 14

func clone(b []byte) []byte { return append([]byte(nil), b...) }

func setDA(f []byte, a netip.Addr) {
	b := a.As16()
	copy(f[ethLen+24:], b[:])
}

// tlvOffset is the frame offset of the OPoT TLV (the first TLV after the
// segments, where the headend puts it).
func tlvOffset(f []byte) (int, error) {
	if len(f) < ethLen+40+8 || f[ethLen+6] != srv6.ProtoRouting {
		return 0, errors.New("not an SRv6 frame")
	}
	srh := ethLen + 40
	off := srh + 8 + 16*(int(f[srh+4])+1)
	if off+opot.TLVLen > len(f) || f[off] != opot.TLVType {
		return 0, fmt.Errorf("no opot tlv at %d", off)
	}
	return off, nil
}

func waitFor(ok func() bool) bool {
	for range 50 {
		if ok() {
			return true
		}
		time.Sleep(40 * time.Millisecond)
	}
	return false
}

func (l *exampleLab) node(t *testing.T, name string) *netns.NS {
	t.Helper()
	ns, err := lab.Open(l.net.Name, name, l.opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Close)
	return ns
}

// chainSIDs are the DAs of the chain's packets at r2, r3 and r6, from
// r6's opot program config (the verifier's entry) and r2's, r3's.
func (l *exampleLab) chainSIDs(t *testing.T) (r2, r3, r6 netip.Addr) {
	t.Helper()
	get := func(node string) netip.Addr { return opotConfig(t, l.net, node).Chains[0].SID }
	return get("r2"), get("r3"), get("r6")
}

// opotCounters reads r6's verifier counters of chain "verified".
func (l *exampleLab) opotCounters(t *testing.T) (verified uint64, drops map[string]uint64) {
	t.Helper()
	pcs, err := lab.Counters(t.Context(), l.net.Name, "r6", l.opts)
	if err != nil {
		t.Fatal(err)
	}
	drops = map[string]uint64{}
	for _, pc := range pcs {
		if pc.Program != state.ProgramOPoT {
			continue
		}
		if pc.Error != "" {
			t.Fatalf("r6 opot counters: %s", pc.Error)
		}
		for _, c := range pc.Counters {
			switch {
			case c.Name == "chain/verified/verified":
				verified = c.Value
			case strings.HasPrefix(c.Name, "chain/verified/drop/"):
				drops[strings.TrimPrefix(c.Name, "chain/verified/drop/")] = c.Value
			}
		}
	}
	return verified, drops
}

func (l *exampleLab) opotDrop(t *testing.T, r drop.Reason) uint64 {
	_, d := l.opotCounters(t)
	return d[r.String()]
}

func (l *exampleLab) opotEvents(t *testing.T) []lab.ProgramEvent {
	t.Helper()
	evs, err := lab.Events(t.Context(), l.net.Name, "", l.opts)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// rawSock is an AF_PACKET socket bound to one interface of a namespace,
// to send frames as they are (through tc egress).
type rawSock struct {
	fd      int
	ifindex int
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func openRaw(t *testing.T, ns *netns.NS, ifname string) *rawSock {
	t.Helper()
	l, err := ns.Netlink().LinkByName(ifname)
	if err != nil {
		t.Fatal(err)
	}
	r := &rawSock{ifindex: l.Attrs().Index}
	err = ns.Do(func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_IPV6)))
		if err != nil {
			return err
		}
		r.fd = fd
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IPV6), Ifindex: r.ifindex})
	})
	if err != nil {
		t.Fatalf("packet socket on %s: %v", ifname, err)
	}
	t.Cleanup(func() { unix.Close(r.fd) })
	return r
}

// ring is an AF_PACKET socket with a TPACKET_V2 receive ring bound to
// one interface of a namespace: the kernel copies each arriving frame
// into the ring at once. It listens to every protocol (ETH_P_ALL): such
// taps run before tc ingress, while a socket bound to ETH_P_IPV6 is
// served after ipv6_rcv, when the node's End has already rewritten the
// packet data it shares.
type ring struct {
	fd  int
	mem []byte
	cur int
}

const (
	ringFrame = 4096
	ringCount = 64
)

func openRing(t *testing.T, ns *netns.NS, ifname string) *ring {
	t.Helper()
	l, err := ns.Netlink().LinkByName(ifname)
	if err != nil {
		t.Fatal(err)
	}
	r := &ring{fd: -1}
	err = ns.Do(func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		r.fd = fd
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V2); err != nil {
			return err
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil {
			return err
		}
		req := unix.TpacketReq{Block_size: ringFrame, Block_nr: ringCount, Frame_size: ringFrame, Frame_nr: ringCount}
		if err := unix.SetsockoptTpacketReq(fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
			return err
		}
		if r.mem, err = unix.Mmap(fd, 0, ringFrame*ringCount, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: l.Attrs().Index})
	})
	t.Cleanup(func() {
		if r.mem != nil {
			unix.Munmap(r.mem)
		}
		if r.fd >= 0 {
			unix.Close(r.fd)
		}
	})
	if err != nil {
		t.Fatalf("packet ring on %s: %v", ifname, err)
	}
	return r
}

// capture returns the first frame in the ring that is an SRv6 packet to da.
func (r *ring) capture(t *testing.T, da netip.Addr) []byte {
	t.Helper()
	want := da.As16()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		base := r.cur * ringFrame
		hdr := (*unix.Tpacket2Hdr)(unsafe.Pointer(&r.mem[base]))
		status := (*uint32)(unsafe.Pointer(&r.mem[base]))
		if atomic.LoadUint32(status)&unix.TP_STATUS_USER == 0 {
			pfd := []unix.PollFd{{Fd: int32(r.fd), Events: unix.POLLIN}}
			_, _ = unix.Poll(pfd, 100)
			continue
		}
		start := base + int(hdr.Mac)
		f := clone(r.mem[start : start+int(hdr.Snaplen)])
		atomic.StoreUint32(status, unix.TP_STATUS_KERNEL)
		r.cur = (r.cur + 1) % ringCount
		if len(f) > ethLen+40 && binary.BigEndian.Uint16(f[12:]) == unix.ETH_P_IPV6 && f[ethLen+6] == srv6.ProtoRouting && string(f[ethLen+24:ethLen+40]) == string(want[:]) {
			return f
		}
	}
	t.Fatalf("no SRv6 frame to %s captured", da)
	return nil
}

func (r *rawSock) send(t *testing.T, frame []byte) {
	t.Helper()
	if err := unix.Sendto(r.fd, frame, 0, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IPV6), Ifindex: r.ifindex}); err != nil {
		t.Fatalf("send frame: %v", err)
	}
}

// sendUDP sends one UDP datagram from ns to dst:9.
func sendUDP(t *testing.T, ns *netns.NS, dst netip.Addr, payload string) {
	t.Helper()
	err := ns.Do(func() error {
		c, err := net.DialUDP("udp6", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, 9)))
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte(payload))
		return err
	})
	if err != nil {
		t.Fatalf("send udp: %v", err)
	}
}

// TestDemoOPoT runs `srchain demo examples/opot-testbed.yaml`: the probes
// pass and the demo prints the chain's verification result at r6.
func TestDemoOPoT(t *testing.T) {
	requireRoot(t)
	if srchainBin == "" {
		t.Fatal("srchain binary not built (see the TestMain output)")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	name := labName("o")
	t.Cleanup(func() {
		left, _ := netns.List(lab.NSName(name, ""))
		for _, n := range left {
			_ = netns.Delete(n)
		}
	})
	file := renamedSpec(t, "opot-testbed.yaml", "o")
	out, err := exec.CommandContext(ctx, srchainBin, "demo", "--brief", "--state-dir", t.TempDir(), file).CombinedOutput()
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	re := regexp.MustCompile(`== opot chain verified: verified at r6: ([1-9][0-9]*), none dropped`)
	if !strings.Contains(string(out), "== 2/2 probes OK") || !re.Match(out) {
		t.Errorf("demo output lacks the probes or the verification result:\n%s", out)
	}
}

// TestLabOPoTCSID: ordered proof of transit on a NEXT-C-SID chain (seed
// 003's OPoT^cSID): examples/csid-quickstart.yaml with opot on web6,
// whose NF SID and egress SID share one container. The headend grows the
// kernel's one-container SRH by the TLV, r2's transit finds the chain by
// the container it sees (its C-SID active), r2's End shifts it, and r3
// verifies under the key (egress SID, the container in segment 0):
// every probe passes and verifies, with no drop; the same with r2 at
// XDP (the transit in its XDP End, before the shift).
func TestLabOPoTCSID(t *testing.T) {
	requireRoot(t)
	t.Run("kernel", func(t *testing.T) { opotCSID(t, "") })
	// r2's transit in its XDP End, before the NEXT-C-SID shift.
	t.Run("xdp", func(t *testing.T) { opotCSID(t, spec.DatapathXDP) })
}

func opotCSID(t *testing.T, dp string) {
	path := filepath.Join("..", "..", "examples", "csid-quickstart.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	const old = "    compression: next-c-sid\n"
	if !strings.Contains(src, old) {
		t.Fatal("csid-quickstart.yaml changed: no compression line")
	}
	src = strings.Replace(src, old, old+"    opot: true\n", 1)
	if dp != "" {
		const r2 = `{name: r2, role: router, locator: "fc00:0:2::/48"}`
		if !strings.Contains(src, r2) {
			t.Fatal("csid-quickstart.yaml changed: no r2 line")
		}
		src = strings.Replace(src, r2, strings.TrimSuffix(r2, "}")+", datapath: "+dp+"}", 1)
	}
	s, err := spec.Check([]byte(src), path)
	if err != nil {
		t.Fatalf("spec: %v", err)
	}
	l := deploySpec(t, s)
	for _, n := range l.net.Nodes {
		for _, r := range n.Routes {
			if r.Chain == "web6" && r.Encap != nil && len(r.Encap.Segments) != 1 {
				t.Fatalf("web6's segments %v: want one container", r.Encap.Segments)
			}
		}
	}
	verified := func() (uint64, map[string]uint64) {
		pcs, err := lab.Counters(t.Context(), l.net.Name, "r3", l.opts)
		if err != nil {
			t.Fatal(err)
		}
		var ok uint64
		drops := map[string]uint64{}
		for _, pc := range pcs {
			for _, c := range pc.Counters {
				if pc.Program != state.ProgramOPoT {
					continue
				}
				switch {
				case c.Name == "chain/web6/verified":
					ok = c.Value
				case strings.HasPrefix(c.Name, "chain/web6/drop/"):
					drops[c.Name] = c.Value
				}
			}
		}
		return ok, drops
	}
	l.probeAll(t)
	ok, drops := verified()
	if ok == 0 || len(drops) != 0 {
		t.Fatalf("after the probes: %d verified at r3, drops %v", ok, drops)
	}
	if dp == spec.DatapathXDP && l.xdpRedirects(t, "r2") == 0 {
		t.Error("r2's XDP End redirected nothing: the transit did not run at XDP")
	}
	sendUDP(t, l.node(t, "h1"), netip.MustParseAddr("fc00:a4::2"), "opot over c-sids")
	if !waitFor(func() bool { n, _ := verified(); return n == ok+1 }) {
		n, d := verified()
		t.Errorf("one more packet: %d verified (was %d), drops %v", n, ok, d)
	}
}

// TestLabOPoTMillion is the volume check, through the whole lab
// chain of examples/opot-testbed.yaml (kernel H.Encaps + headend stage at
// r1, transits at r2 and r3, verifier at r6): 1,000,000 legitimate UDP
// packets from h1 to h2, each with its own sequence number, and not one
// false drop (the verifier counts every packet it gets as verified, and
// h2 receives what it verified); then 200 tampered packets of each class
// (r2 skipped, r2 and r3 swapped, a forged TLV with random RND and CML
// between r2 and r3, replays, a random bit of RND or of CML flipped), and
// every one of them detected: dropped at r6, counted with its reason.
func TestLabOPoTMillion(t *testing.T) {
	requireRoot(t)
	l := deployExample(t, "opot-testbed.yaml", "")
	h1, h2 := l.node(t, "h1"), l.node(t, "h2")
	dst := netip.MustParseAddr("fc00:8::2")
	// What reaches h2: its interface's receive counter (a socket would
	// drop what it cannot read fast enough).
	rx := func() uint64 {
		t.Helper()
		lk, err := h2.Netlink().LinkByName("eth0")
		if err != nil {
			t.Fatal(err)
		}
		return lk.Attrs().Statistics.RxPackets
	}
	// A socket bound to the port, never read: h2 sends no Port
	// Unreachable back (which would fail the sender's writes).
	var pc net.PacketConn
	if err := h2.Do(func() (err error) { pc, err = net.ListenPacket("udp6", "[::]:9"); return err }); err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	rx0 := rx()
	got := func() uint64 { return rx() - rx0 }
	v0, d0 := l.opotCounters(t)
	const n = 1_000_000
	if err := h1.Do(func() error {
		c, err := net.DialUDP("udp6", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, 9)))
		if err != nil {
			return err
		}
		defer c.Close()
		payload := make([]byte, 64)
		for i := range n {
			binary.BigEndian.PutUint64(payload, uint64(i))
			if _, err := c.Write(payload); err != nil {
				return fmt.Errorf("packet %d: %w", i, err)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	waitFor(func() bool { v, _ := l.opotCounters(t); return v-v0 >= n })
	waitFor(func() bool { return got() >= n })
	v, d := l.opotCounters(t)
	t.Logf("%d sent, %d verified at r6, %d frames received at h2, verifier drops %v", n, v-v0, got(), d)
	if fmt.Sprint(d) != fmt.Sprint(d0) {
		t.Fatalf("false drops at the verifier: %v (before: %v)", d, d0)
	}
	// h2's counter also counts its neighbour discovery frames.
	if v-v0 != n || got() < n {
		t.Errorf("%d verified and %d frames received of %d sent: every packet must verify and arrive", v-v0, got(), n)
	}

	// Tampered packets, 200 of each class, made from legitimate ones
	// captured on the wire (as TestLabOPoT, one each).
	r1, r2, r3, r6 := l.node(t, "r1"), l.node(t, "r2"), l.node(t, "r3"), l.node(t, "r6")
	c2, c3, c6 := openRing(t, r2, "eth0"), openRing(t, r3, "eth0"), openRing(t, r6, "eth0")
	sendUDP(t, h1, dst, "opot-million")
	sid2, sid3, sid6 := l.chainSIDs(t)
	atR2, atR3, atR6 := c2.capture(t, sid2), c3.capture(t, sid3), c6.capture(t, sid6)
	tx1, tx2, tx3 := openRaw(t, r1, "eth1"), openRaw(t, r2, "eth1"), openRaw(t, r3, "eth1")
	rng := mrand.New(mrand.NewPCG(11, 3))
	const per = 200
	seg := ethLen + 40 + 8
	classes := []struct {
		name   string
		via    *rawSock
		reason drop.Reason
		make   func() []byte
	}{
		{"skip r2", tx1, drop.OPoTVerify, func() []byte {
			f := clone(atR2)
			setDA(f, sid3)
			f[ethLen+40+3] = 1
			return f
		}},
		{"r2 and r3 swapped", tx1, drop.OPoTVerify, func() []byte {
			f := clone(atR2)
			s1, s2 := clone(f[seg+16:seg+32]), clone(f[seg+32:seg+48])
			copy(f[seg+16:], s2)
			copy(f[seg+32:], s1)
			setDA(f, sid3)
			return f
		}},
		{"forged TLV", tx2, drop.OPoTVerify, func() []byte {
			f := clone(atR3)
			off, _ := tlvOffset(f)
			binary.BigEndian.PutUint64(f[off+8:], rng.Uint64())
			binary.BigEndian.PutUint64(f[off+16:], rng.Uint64())
			return f
		}},
		{"replay", tx3, drop.OPoTReplay, func() []byte { return clone(atR6) }},
		{"RND bit flip", tx3, drop.OPoTVerify, func() []byte {
			f := clone(atR6)
			off, _ := tlvOffset(f)
			bit := rng.IntN(64)
			f[off+8+bit/8] ^= 1 << (bit % 8)
			return f
		}},
		{"CML bit flip", tx3, drop.OPoTVerify, func() []byte {
			f := clone(atR6)
			off, _ := tlvOffset(f)
			bit := rng.IntN(64)
			f[off+16+bit/8] ^= 1 << (bit % 8)
			return f
		}},
	}
	for _, c := range classes {
		_, before := l.opotCounters(t)
		for range per {
			c.via.send(t, c.make())
		}
		want := before[c.reason.String()] + per
		if !waitFor(func() bool { _, d := l.opotCounters(t); return d[c.reason.String()] >= want }) {
			_, d := l.opotCounters(t)
			t.Errorf("%s: %d of %d detected (drops %v)", c.name, d[c.reason.String()]-before[c.reason.String()], per, d)
		}
	}
	v2, d2 := l.opotCounters(t)
	t.Logf("after %d tampered packets: %d verified (the capture's packet included), drops %v", per*len(classes), v2-v, d2)
	if v2 != v+1 {
		t.Errorf("a tampered packet verified: %d verified, want %d", v2, v+1)
	}
}

// opotConfig is the config of node's OPoT program in nw (the test fails
// without one).
func opotConfig(t *testing.T, nw *state.Network, node string) state.OPoTConfig {
	t.Helper()
	for _, n := range nw.Nodes {
		if n.Name != node {
			continue
		}
		for _, p := range n.Programs {
			if p.Kind != state.ProgramOPoT {
				continue
			}
			var cfg state.OPoTConfig
			if err := json.Unmarshal(p.Config, &cfg); err != nil {
				t.Fatal(err)
			}
			return cfg
		}
	}
	t.Fatalf("%s has no opot program", node)
	return state.OPoTConfig{}
}

// TestLabOPoTBypass deploys the testbed and sends to r6's egress SID,
// from r3 (r6's neighbour on the chain), issue 34's three shapes that
// the kernel's End.DT6 route used to decapsulate and deliver with no
// counter and no event: the SRH removed (plain IPv6-in-IPv6), SL 0 with
// segment[0] rewritten (to the destination, or random), and DA =
// segment[0] = the egress SID with ARGS bits set, plus the SID with
// ARGS and no SRH. Each carries a legitimate packet's proof and an inner
// packet to h2 with a marker. At r6 every one is dropped as opot-bypass
// (the counter moves by the number sent, one event each) and none
// reaches h2 (captured there until a legitimate packet sent after them
// arrives); legitimate traffic keeps verifying. Then the defence in
// depth: with r6's egress prefix taken out of the verifier's map by
// hand (as if its stage were not there), a shape passes the verifier
// unmarked and r6's rule blackholes it before the decap route: still
// not delivered, while the legitimate packet after it, marked by the
// verifier, is (the kernel honours the tc stage's skb->mark in its input
// route lookup). Runs with r6 at tc and at XDP (`datapath: xdp`).
func TestLabOPoTBypass(t *testing.T) {
	requireRoot(t)
	for _, dp := range []string{"tc", spec.DatapathXDP} {
		t.Run(dp, func(t *testing.T) {
			var l *exampleLab
			if dp == "tc" {
				l = deployExample(t, "opot-testbed.yaml", "")
			} else {
				l = deployExample(t, "opot-testbed.yaml", spec.DatapathXDP, "r6")
			}
			opotBypass(t, l, dp == spec.DatapathXDP)
		})
	}
}

func opotBypass(t *testing.T, l *exampleLab, xdp bool) {
	l.probeAll(t)
	verified, drops := l.opotCounters(t)
	if verified == 0 || len(drops) != 0 {
		t.Fatalf("after the probes: %d verified, drops %v; want > 0 and none", verified, drops)
	}
	// `lab status` names the headend stage at r1's tcx egress (issue
	// 34 6b: it showed an empty "eth0:").
	sts, err := lab.Status(t.Context(), l.net.Name, l.opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range sts {
		if st.Node != "r1" {
			continue
		}
		for ifn, names := range st.Programs {
			if !slices.Contains(names, "egress:srchain_opot_headend") {
				t.Errorf("lab status: r1 %s runs %v, want egress:srchain_opot_headend among them", ifn, names)
			}
		}
	}
	r3, r6, h1, h2 := l.node(t, "r3"), l.node(t, "r6"), l.node(t, "h1"), l.node(t, "h2")
	if out, err := r6.Run(t.Context(), "ip", "-6", "rule", "show", "pref", fmt.Sprint(opotdp.RulePref)); err != nil || !strings.Contains(out, "fwmark 0/0x40000000 blackhole") {
		t.Fatalf("r6: no egress rule at pref %d: %q, %v", opotdp.RulePref, out, err)
	}
	c6 := openRing(t, r6, "eth0")
	sendUDP(t, h1, netip.MustParseAddr("fc00:8::2"), "opot-bypass-legit")
	_, _, sid6 := l.chainSIDs(t)
	atR6 := c6.capture(t, sid6)
	if _, err := tlvOffset(atR6); err != nil {
		t.Fatal(err)
	}
	// The outer headers: Ethernet, IPv6 and the SRH with its proof.
	hdr := clone(atR6[:ethLen+40+8*(int(atR6[ethLen+40+1])+1)])
	tx3 := openRaw(t, r3, "eth1")
	src, dst := netip.MustParseAddr("fc00:1::1"), netip.MustParseAddr("fc00:8::2")
	inner := func(marker string) []byte { return srv6.UDP6(src, dst, 1000, 9, []byte(marker)) }
	// withSRH is the captured outer headers (its SRH and proof) around
	// inner; noSRH an outer IPv6 header to da straight before inner.
	withSRH := func(marker string) []byte {
		in := inner(marker)
		f := append(clone(hdr), in...)
		binary.BigEndian.PutUint16(f[ethLen+4:], uint16(len(f)-ethLen-40))
		return f
	}
	noSRH := func(da netip.Addr, marker string) []byte {
		in := inner(marker)
		f := clone(hdr[:ethLen+40])
		f[ethLen+6] = 41 // IPv6 in IPv6
		binary.BigEndian.PutUint16(f[ethLen+4:], uint16(len(in)))
		setDA(f, da)
		return append(f, in...)
	}
	seg0 := ethLen + 40 + 8
	setSeg0 := func(f []byte, a netip.Addr) []byte { b := a.As16(); copy(f[seg0:], b[:]); return f }
	a16 := sid6.As16()
	a16[15] |= 7 // ARGS: the SID format's low 16 bits
	withArgs := netip.AddrFrom16(a16)
	var random [16]byte
	rng := mrand.New(mrand.NewPCG(34, 2))
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	shapes := []struct {
		name  string
		frame func(marker string) []byte
	}{
		{"srh removed", func(m string) []byte { return noSRH(sid6, m) }},
		{"srh removed, args", func(m string) []byte { return noSRH(withArgs, m) }},
		{"sl 0, segment[0] the destination", func(m string) []byte { return setSeg0(withSRH(m), dst) }},
		{"sl 0, segment[0] random", func(m string) []byte { return setSeg0(withSRH(m), netip.AddrFrom16(random)) }},
		{"da = segment[0] = sid with args", func(m string) []byte { f := setSeg0(withSRH(m), withArgs); setDA(f, withArgs); return f }},
	}
	delivered := func(ring *ring, legit string) []string {
		t.Helper()
		var seen []string
		for {
			f := ring.captureUDP(t, 9)
			p := string(f[ethLen+40+8:])
			if strings.HasPrefix(p, "bypass-") {
				seen = append(seen, p)
			}
			if p == legit {
				return seen
			}
		}
	}
	// 1. The verifier drops them, counted and reported.
	rh2 := openRing(t, h2, "eth0")
	evBefore := len(l.opotEvents(t))
	before := l.opotDrop(t, drop.OPoTBypass)
	var xdpDrops uint64
	if xdp {
		xdpDrops = l.pipelineCounters(t, "r6")["stage/opot/drop"]
	}
	for i, s := range shapes {
		tx3.send(t, s.frame(fmt.Sprintf("bypass-%d %s", i, s.name)))
	}
	sendUDP(t, h1, dst, "opot-bypass-after")
	if seen := delivered(rh2, "opot-bypass-after"); len(seen) != 0 {
		t.Errorf("delivered to h2: %q", seen)
	}
	if !waitFor(func() bool { return l.opotDrop(t, drop.OPoTBypass) == before+uint64(len(shapes)) }) {
		v, d := l.opotCounters(t)
		t.Errorf("drop/opot-bypass %d, want %d (verified %d, drops %v)", l.opotDrop(t, drop.OPoTBypass), before+uint64(len(shapes)), v, d)
	}
	if xdp {
		// Dropped at XDP, by the pipeline's opot stage, not at tc.
		if got := l.pipelineCounters(t, "r6")["stage/opot/drop"]; got != xdpDrops+uint64(len(shapes)) {
			t.Errorf("r6 xdp pipeline: stage/opot/drop %d, want %d", got, xdpDrops+uint64(len(shapes)))
		}
	}
	evs := l.opotEvents(t)[evBefore:]
	n := 0
	for _, e := range evs {
		if e.Reason == drop.OPoTBypass.String() && e.Node == "r6" && e.Subject == "chain/verified" {
			n++
		}
	}
	if n != len(shapes) {
		t.Errorf("events %+v: %d opot-bypass at r6, want %d", evs, n, len(shapes))
	}
	v, d := l.opotCounters(t)
	if v < verified+2 || len(d) != 1 {
		t.Errorf("after the shapes: %d verified (was %d, 2 sent), drops %v; want opot-bypass alone", v, verified, d)
	}
	// 2. Defence in depth: r6's egress prefix out of opot_egress, a
	// shape reaches the kernel unmarked, the rule drops it.
	em, err := ebpf.LoadPinnedMap(opotdp.PinDir(r6)+"/opot_egress", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer em.Close()
	var k opotdp.EgressKey
	var ck opotdp.ChainKey
	if err := em.NextKey(nil, &k); err != nil {
		t.Fatal(err)
	}
	if err := em.Lookup(&k, &ck); err != nil {
		t.Fatal(err)
	}
	if err := em.Delete(&k); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			if err := em.Put(&k, &ck); err != nil {
				t.Error(err)
			}
		}
	}
	defer restore()
	before = l.opotDrop(t, drop.OPoTBypass)
	tx3.send(t, setSeg0(withSRH("bypass-unverified"), dst))
	restore()
	sendUDP(t, h1, dst, "opot-bypass-marked")
	if seen := delivered(rh2, "opot-bypass-marked"); len(seen) != 0 {
		t.Errorf("without the verifier's entry, delivered to h2: %q (the rule did not drop it)", seen)
	}
	if got := l.opotDrop(t, drop.OPoTBypass); got != before {
		t.Errorf("without the verifier's entry: drop/opot-bypass %d, want %d (the verifier saw it)", got, before)
	}
	l.probeAll(t)
	if v2, d2 := l.opotCounters(t); v2 <= v || len(d2) != 1 {
		t.Errorf("after the bypass shapes, probes: %d verified (was %d), drops %v", v2, v, d2)
	}
}

// captureUDP returns the next IPv6 UDP frame to port in the ring.
func (r *ring) captureUDP(t *testing.T, port uint16) []byte {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		base := r.cur * ringFrame
		hdr := (*unix.Tpacket2Hdr)(unsafe.Pointer(&r.mem[base]))
		status := (*uint32)(unsafe.Pointer(&r.mem[base]))
		if atomic.LoadUint32(status)&unix.TP_STATUS_USER == 0 {
			pfd := []unix.PollFd{{Fd: int32(r.fd), Events: unix.POLLIN}}
			_, _ = unix.Poll(pfd, 100)
			continue
		}
		start := base + int(hdr.Mac)
		f := clone(r.mem[start : start+int(hdr.Snaplen)])
		atomic.StoreUint32(status, unix.TP_STATUS_KERNEL)
		r.cur = (r.cur + 1) % ringCount
		if len(f) >= ethLen+40+8 && binary.BigEndian.Uint16(f[12:]) == unix.ETH_P_IPV6 && f[ethLen+6] == unix.IPPROTO_UDP && binary.BigEndian.Uint16(f[ethLen+40+2:]) == port {
			return f
		}
	}
	t.Fatalf("no UDP frame to port %d captured", port)
	return nil
}
