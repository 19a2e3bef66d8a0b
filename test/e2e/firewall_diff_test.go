package e2e

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"github.com/srchain/srchain/internal/testutil"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/srchain/srchain/internal/drop"
	"github.com/srchain/srchain/internal/firewall"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/srv6"
)

// fwPrefix names this process's firewall test namespaces (srct-f<pid>).
func fwPrefix() string { return fmt.Sprintf("srct-f%d", os.Getpid()) }

func fwNeedRoot(t *testing.T) {
	t.Helper()
	testutil.RequireRoot(t)
}

// fwNS creates a namespace removed when the test ends, pass or fail.
func fwNS(t *testing.T, tag string) *netns.NS {
	t.Helper()
	name := fwPrefix() + tag
	_ = netns.Delete(name) // a leftover of a crashed run with the same pid
	ns, err := netns.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ns.Close()
		if err := netns.Delete(name); err != nil {
			t.Errorf("delete namespace %s: %v", name, err)
		}
	})
	return ns
}

func fwRun(t *testing.T, ns *netns.NS, cmds ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for _, c := range cmds {
		f := strings.Fields(c)
		if out, err := ns.Run(ctx, f[0], f[1:]...); err != nil {
			t.Fatalf("%s: %v: %s", c, err, out)
		}
	}
}

// Pools small enough that random rules and packets often meet.
var (
	fwDiffSIDs  = []string{"fc00:1::1", "fc00:2::f1:0", "fc00:2::f1:1", "fc00:3::d6", "fc00:3::d7", "fc00:4::1"}
	fwDiffPlens = []int{16, 32, 64, 127, 128}
)

// fwClass names the rule forms whose meaning this test pins down beyond
// plain options: each has a mutation (the wrong reading srchain had, or
// an easy one to make) that must disagree with the kernel somewhere, so
// the test could fail for each of them.
type fwClass uint8

const (
	fwNone      fwClass = iota
	fwTCPUDP            // -p tcp|udp -m tcp|udp with no port option: never a non-first fragment
	fwProto0            // -p 0|all|hopopt: every protocol
	fwProtoName         // -p NAME from /etc/protocols, extension headers included
	fwSameVal           // two comparisons, one value, on one SRH field (ip6tables-save's form)
	fwTwoSRH            // two -m srh: both hold
	fwClasses
)

var fwClassNames = [fwClasses]string{"plain", "tcp/udp match without ports", "-p 0", "-p name", "one SRH field twice", "two -m srh"}

// fwPart is a piece of a rule's text; alt replaces it in the mutation of
// its class.
type fwPart struct {
	s, alt string
	class  fwClass
}

// fwDiffRule is a random ip6tables rule (as ip6tables-legacy-save
// prints it) with srh options, outer -s/-d, -p and ports, each possibly
// negated, in parts (see fwPart).
func fwDiffRule(r *rand.Rand) []fwPart {
	var parts []fwPart
	add := func(format string, args ...any) { parts = append(parts, fwPart{s: fmt.Sprintf(format, args...)}) }
	neg := func() string {
		if r.IntN(3) == 0 {
			return "! "
		}
		return ""
	}
	pfx := func() string {
		a := netip.MustParseAddr(fwDiffSIDs[r.IntN(len(fwDiffSIDs))])
		return netip.PrefixFrom(a, fwDiffPlens[r.IntN(len(fwDiffPlens))]).Masked().String()
	}
	if r.IntN(4) == 0 {
		add("%s-s %s ", neg(), pfx())
	}
	if r.IntN(4) == 0 {
		add("%s-d %s ", neg(), pfx())
	}
	switch k := r.IntN(10); {
	case k < 3:
		proto := []string{"tcp", "udp"}[r.IntN(2)]
		switch r.IntN(3) {
		case 0: // the match alone: mutated, it reads non-first fragments
			parts = append(parts, fwPart{s: fmt.Sprintf("-p %s -m %s ", proto, proto), alt: fmt.Sprintf("-p %s ", proto), class: fwTCPUDP})
		case 1:
			lo := 60 + r.IntN(40)
			add("-p %s -m %s %s--dport %d:%d ", proto, proto, neg(), lo, lo+r.IntN(20))
		default:
			lo := 60 + r.IntN(40)
			add("-p %s -m %s %s--sport 1000 -m %s %s--dport %d:%d ", proto, proto, neg(), proto, neg(), lo, lo+r.IntN(20))
		}
	case k < 4:
		// Mutated: protocol number 0 literally (what srchain read),
		// which the walk never stops at, like 255 here.
		parts = append(parts, fwPart{s: fmt.Sprintf("-p %s ", []string{"0", "all", "hopopt"}[r.IntN(3)]), alt: "-p 255 ", class: fwProto0})
	case k < 6:
		name := []string{"ipv6-nonxt", "ipv6-opts", "ipv6-route", "ipv6-frag", "ah", "ipencap", "ipv6", "41", "4", "59", "43"}[r.IntN(11)]
		n := neg()
		alt := "! "
		if n != "" {
			alt = ""
		}
		parts = append(parts, fwPart{s: fmt.Sprintf("%s-p %s ", n, name), alt: fmt.Sprintf("%s-p %s ", alt, name), class: fwProtoName})
	}
	verdict := []string{"-j ACCEPT", "-j DROP"}[r.IntN(2)]
	if r.IntN(4) == 0 {
		// No srh match: plain ip6tables options only (-p and ports see
		// through extension headers, as ipv6_find_hdr).
		if len(parts) == 0 {
			add("%s-p %s ", neg(), []string{"tcp", "udp", "41", "4"}[r.IntN(4)])
		}
		add("%s", verdict)
		return parts
	}
	// srh adds one -m srh with 1-3 options; an integer field sometimes
	// gets two comparisons with one value.
	srh := func() []fwPart {
		ps := []fwPart{{s: "-m srh "}}
		one := func(format string, args ...any) { ps = append(ps, fwPart{s: fmt.Sprintf(format, args...)}) }
		intOpt := func(name string, v int) {
			cmps := r.Perm(3)
			opt := func(i int) string {
				return fmt.Sprintf("%s--srh-%s-%s %d ", neg(), name, []string{"eq", "gt", "lt"}[cmps[i]], v)
			}
			if r.IntN(3) == 0 {
				// Mutated: only the first comparison kept.
				ps = append(ps, fwPart{s: opt(0)}, fwPart{s: opt(1), class: fwSameVal})
				return
			}
			one("%s", opt(0))
		}
		opts := []func(){
			func() { one("%s--srh-next-hdr %d ", neg(), []int{41, 4, 6, 17, 59, 44}[r.IntN(6)]) },
			func() { intOpt("hdr-len", 2*(1+r.IntN(4))) },
			func() { intOpt("segs-left", r.IntN(4)) },
			func() { intOpt("last-entry", r.IntN(4)) },
			func() { one("%s--srh-tag %d ", neg(), []int{0, 1, 256}[r.IntN(3)]) },
			func() { one("%s--srh-psid %s ", neg(), pfx()) },
			func() { one("%s--srh-nsid %s ", neg(), pfx()) },
			func() { one("%s--srh-lsid %s ", neg(), pfx()) },
		}
		for _, k := range r.Perm(len(opts))[:1+r.IntN(3)] {
			opts[k]()
		}
		return ps
	}
	parts = append(parts, srh()...)
	if r.IntN(4) == 0 {
		// Mutated: the second match left out.
		for _, p := range srh() {
			parts = append(parts, fwPart{s: p.s, class: fwTwoSRH})
		}
	}
	add("%s", verdict)
	return parts
}

// fwText is a rule's text, with the parts of class mut mutated
// (fwNone: as generated).
func fwText(parts []fwPart, mut fwClass) string {
	var b strings.Builder
	for _, p := range parts {
		if mut != fwNone && p.class == mut {
			b.WriteString(p.alt)
		} else {
			b.WriteString(p.s)
		}
	}
	return strings.TrimSpace(b.String())
}

// fwLastExt walks b's Hop-by-Hop, Destination Options, Routing and
// Fragment headers: nhOff is the offset of the last next-header byte,
// off where the header it names starts.
func fwLastExt(b []byte) (nhOff, off int) {
	nhOff, off = 6, 40
	for {
		switch b[nhOff] {
		case 0, 43, 60:
			nhOff, off = off, off+(int(b[off+1])+1)*8
		case 44:
			nhOff, off = off, off+8
		default:
			return nhOff, off
		}
	}
}

// fwFragment inserts a fragment header (offset in 8-byte units, M flag)
// behind b's extension headers, before its transport or inner packet:
// offset 0 is a first fragment, which keeps its ports; any other offset
// is a non-first fragment, whose bytes behind the header are not a
// transport header (ip6tables' tcp/udp matches never match it). Its next
// header is never an extension header (see "kernel differences" in
// docs/firewall.md: ip6tables drops such a non-first fragment at the
// first rule with -p).
func fwFragment(b []byte, offset uint16, more bool) []byte {
	nhOff, off := fwLastExt(b)
	fo := offset << 3
	if more {
		fo |= 1
	}
	h := []byte{b[nhOff], 0, byte(fo >> 8), byte(fo), 0, 0, 0x12, 0x34}
	out := append(append(append([]byte(nil), b[:off]...), h...), b[off:]...)
	out[nhOff] = 44
	binary.BigEndian.PutUint16(out[4:], uint16(len(out)-40))
	return out
}

// fwNoNext makes b end its header chain with No Next Header (59): what
// follows its last extension header is payload nobody parses.
func fwNoNext(b []byte) []byte {
	nhOff, _ := fwLastExt(b)
	b[nhOff] = 59
	return b
}

// fwDiffPacket is a random valid SRv6 packet (encap IPv6/IPv4 or insert
// TCP/UDP, 1-4 SIDs, any SL up to last entry + 1, tag) whose flow label
// carries id; a third are fragments (half of them non-first), a few
// end in No Next Header.
func fwDiffPacket(r *rand.Rand, id uint32) []byte {
	b := fwDiffPacket0(r)
	if r.IntN(12) == 0 {
		b = fwNoNext(b)
	}
	if r.IntN(3) == 0 {
		off := uint16(0)
		if r.IntN(2) == 0 {
			off = uint16(1 + r.IntN(300))
		}
		b = fwFragment(b, off, r.IntN(2) == 0)
	}
	b[1] = b[1]&0xf0 | byte(id>>16)&0x0f
	b[2], b[3] = byte(id>>8), byte(id)
	return b
}

func fwDiffPacket0(r *rand.Rand) []byte {
	sid := func() netip.Addr { return netip.MustParseAddr(fwDiffSIDs[r.IntN(len(fwDiffSIDs))]) }
	travel := make([]netip.Addr, 1+r.IntN(4))
	for i := range travel {
		travel[i] = sid()
	}
	src := sid()
	dport := uint16(60 + r.IntN(50))
	var b []byte
	var err error
	// Destination options (Pad1 only), before a transport or an SRH.
	dstopts := func(p []byte) []byte {
		out := append(append([]byte(nil), p[:40]...), p[6], 0, 0, 0, 0, 0, 0, 0)
		out = append(out, p[40:]...)
		out[6] = 60
		binary.BigEndian.PutUint16(out[4:], uint16(len(out)-40))
		return out
	}
	if r.IntN(8) == 0 {
		// Not SR traffic, sometimes behind destination options.
		if r.IntN(2) == 0 {
			b = srv6.UDP6(src, sid(), 1000, dport, []byte("plain"))
		} else {
			b = srv6.TCP6(src, sid(), 1000, dport, 0x02, nil)
		}
		if r.IntN(2) == 0 {
			b = dstopts(b)
		}
		return b
	}
	switch r.IntN(4) {
	case 0:
		b, err = srv6.Encap(src, travel, srv6.UDP6(sid(), sid(), 1000, dport, []byte("diff")))
	case 1:
		b, err = srv6.Encap(src, travel, srv6.UDP4(netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.1.1"), 1000, dport, []byte("diff4")))
	case 2:
		inner := srv6.TCP6(src, sid(), 1000, dport, 0x02, nil)
		if r.IntN(3) == 0 {
			inner = dstopts(inner) // after the SRH once inserted
		}
		b, err = srv6.Insert(inner, travel)
	default:
		b, err = srv6.Insert(srv6.UDP6(src, sid(), 1000, dport, []byte("ins")), travel)
	}
	if err != nil {
		panic(err) // fixtures from valid inputs
	}
	last := int(b[44])
	sl := r.IntN(last + 2) // SL = last entry + 1: ip6t_srh matches nothing
	b[43] = byte(sl)
	binary.BigEndian.PutUint16(b[46:], []uint16{0, 1, 256}[r.IntN(3)])
	if r.IntN(4) != 0 && sl <= last {
		copy(b[24:40], b[48+16*sl:64+16*sl]) // DA = active SID
	} else {
		copy(b[24:40], sid().AsSlice())
	}
	if r.IntN(5) == 0 {
		b = dstopts(b) // before the SRH
	}
	return b
}

// TestFirewallVsIP6tables feeds the same random SRv6 packets to the
// kernel's ip6tables -m srh (raw PREROUTING of a namespace that forwards
// survivors to a sink) and to srchain's firewall in advanced mode with
// the same rules (BPF test run of the tc program and, in an object of its
// own so that the rule counters compared with ip6tables' count each
// packet once, of the XDP pipeline stage), and requires the same
// accept/drop decision for every packet.
func TestFirewallVsIP6tables(t *testing.T) {
	fwNeedRoot(t)
	testutil.RequireTool(t, "ip6tables-legacy-restore")
	ns := fwNS(t, "k")
	fwRun(t, ns,
		"ip link add fwi0 type veth peer name fwk0",
		"ip link add fwk1 type veth peer name fws0",
		"sysctl -qw net.ipv6.conf.all.forwarding=1",
		"sysctl -qw net.ipv6.conf.all.accept_dad=0",
		"sysctl -qw net.ipv6.conf.default.accept_dad=0",
		"ip link set fwi0 up", "ip link set fwk0 up", "ip link set fwk1 up", "ip link set fws0 up",
		"ip -6 addr add fd00:ffff::1/64 dev fwk1 nodad",
		"ip -6 neigh add fd00:ffff::2 lladdr 02:00:00:00:00:99 dev fwk1 nud permanent",
		"ip -6 route add ::/0 via fd00:ffff::2 dev fwk1",
	)
	var kIn, iOut, sIn int
	var kMAC net.HardwareAddr
	for name, p := range map[string]*int{"fwk0": &kIn, "fwi0": &iOut, "fws0": &sIn} {
		l, err := ns.Netlink().LinkByName(name)
		if err != nil {
			t.Fatal(err)
		}
		*p = l.Attrs().Index
		if name == "fwk0" {
			kMAC = l.Attrs().HardwareAddr
		}
	}
	var tx, rx int
	err := ns.Do(func() error {
		var err error
		if tx, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0); err != nil {
			return err
		}
		if err = unix.Bind(tx, &unix.SockaddrLinklayer{Ifindex: iOut}); err != nil {
			return err
		}
		proto := int(fwHtons(unix.ETH_P_ALL))
		if rx, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, proto); err != nil {
			return err
		}
		_ = unix.SetsockoptInt(rx, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 16<<20)
		_ = unix.SetsockoptTimeval(rx, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 100000})
		return unix.Bind(rx, &unix.SockaddrLinklayer{Ifindex: sIn, Protocol: uint16(proto)})
	})
	if err != nil {
		t.Fatalf("packet sockets: %v", err)
	}
	defer unix.Close(tx)
	defer unix.Close(rx)

	fw, err := firewall.LoadCapacity(firewall.Config{Mode: firewall.Advanced}, firewall.Capacity{Bitmaps: 4096, Prefixes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	fwx, err := firewall.LoadCapacity(firewall.Config{Mode: firewall.Advanced}, firewall.Capacity{Bitmaps: 4096, Prefixes: 4096, XDP: true})
	if err != nil {
		t.Fatal(err)
	}
	defer fwx.Close()
	// Pinned, so `srchain firewall counters --pin` reads the counters
	// compared with ip6tables' below.
	pin := fmt.Sprintf("/sys/fs/bpf/srct-f%d-diff", os.Getpid())
	if err := os.MkdirAll(pin, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(pin) })
	if err := fw.Pin(pin); err != nil {
		t.Fatal(err)
	}

	r := rand.New(rand.NewPCG(2026, 11))
	const rounds, perRound, nRules = 4, 1000, 24
	id := uint32(1)
	var caught [fwClasses]int // per class, packets its mutation decides unlike the kernel
	for round := 0; round < rounds; round++ {
		texts := make([]string, nRules)
		var mutated [fwClasses][]string
		for i := range texts {
			parts := fwDiffRule(r)
			texts[i] = fwText(parts, fwNone)
			for c := fwNone + 1; c < fwClasses; c++ {
				mutated[c] = append(mutated[c], fwText(parts, c))
			}
		}
		rules, err := firewall.Parse(strings.Join(texts, "\n"))
		if err != nil {
			t.Fatal(err)
		}
		var mutRules [fwClasses][]firewall.Rule
		for c := fwNone + 1; c < fwClasses; c++ {
			if mutRules[c], err = firewall.Parse(strings.Join(mutated[c], "\n")); err != nil {
				t.Fatalf("mutation %s: %v", fwClassNames[c], err)
			}
		}
		for _, f := range []*firewall.Firewall{fw, fwx} {
			if err := f.Update(firewall.Config{Mode: firewall.Advanced, Rules: rules}); err != nil {
				t.Fatal(err)
			}
		}
		// Hop limit 64: the test's packets, not the namespace's own
		// ND/MLD (255, 1), which would make the counters differ.
		restore := "*raw\n:PREROUTING ACCEPT [0:0]\n:SRCHAINFW - [0:0]\n-A PREROUTING -i fwk0 -m hl --hl-eq 64 -j SRCHAINFW\n"
		for _, s := range texts {
			restore += "-A SRCHAINFW " + fwKernelTag(s) + "\n"
		}
		restore += "COMMIT\n"
		if err := fwRestore(t, ns, restore); err != nil {
			t.Fatal(err)
		}

		// Receive in the background while sending.
		got := map[uint32]bool{}
		var mu sync.Mutex
		done := make(chan struct{})
		stop := make(chan struct{})
		go func() {
			defer close(done)
			buf := make([]byte, 4096)
			quiet := 0
			for {
				n, _, err := unix.Recvfrom(rx, buf, 0)
				if err != nil {
					select {
					case <-stop:
						quiet++
						if quiet >= 3 {
							return
						}
					default:
					}
					continue
				}
				quiet = 0
				f := buf[:n]
				// Ours: forwarded once (hop limit decremented), so not
				// the namespace's own ND/MLD traffic.
				if n < 14+40 || binary.BigEndian.Uint16(f[12:]) != 0x86dd || f[14+7] != srv6.DefaultHopLimit-1 {
					continue
				}
				fl := binary.BigEndian.Uint32(f[14:]) & 0xfffff
				mu.Lock()
				got[fl] = true
				mu.Unlock()
			}
		}()

		pkts := make(map[uint32][]byte, perRound)
		want := map[uint32]bool{}
		first := id
		for k := 0; k < perRound; k++ {
			b := fwDiffPacket(r, id)
			pkts[id] = b
			frame := srv6.Ether(kMAC, net.HardwareAddr{2, 0, 0, 0, 0, 0x11}, srv6.EtherTypeIPv6, b)
			ret, err := fw.Program().Run(&ebpf.RunOptions{Data: frame})
			if err != nil {
				t.Fatal(err)
			}
			want[id] = ret != 2 // not TC_ACT_SHOT
			xret, err := fwx.XDPProgram().Run(&ebpf.RunOptions{Data: frame})
			if err != nil {
				t.Fatal(err)
			}
			if xdpAccept := xret != 1; xdpAccept != want[id] { // 1: XDP_DROP
				t.Errorf("packet %d: xdp stage verdict %d, tc verdict %d\n%x", id, xret, ret, b)
			}
			if err := unix.Sendto(tx, frame, 0, &unix.SockaddrLinklayer{Ifindex: iOut}); err != nil {
				t.Fatalf("send: %v", err)
			}
			if k%100 == 99 {
				time.Sleep(5 * time.Millisecond) // stay under the backlog queue
			}
			id++
		}
		close(stop)
		<-done

		fwCompareCounters(t, ns, pin, round, texts)

		mismatches := 0
		accepted := 0
		for i := first; i < id; i++ {
			if want[i] {
				accepted++
			}
			// The Go model agrees with the BPF program, and each
			// mutation is caught somewhere.
			if o := firewall.Decide(pkts[i], firewall.Config{Mode: firewall.Advanced, Rules: rules}, 0); (o.Drop == drop.None) != want[i] {
				t.Errorf("round %d packet %d: model accepted=%v (rule %d), bpf accepted=%v", round, i, o.Drop == drop.None, o.Rule, want[i])
			}
			for c := fwNone + 1; c < fwClasses; c++ {
				if o := firewall.Decide(pkts[i], firewall.Config{Mode: firewall.Advanced, Rules: mutRules[c]}, 0); (o.Drop == drop.None) != got[i] {
					caught[c]++
				}
			}
			if got[i] != want[i] {
				mismatches++
				if mismatches <= 5 {
					v, _, _ := firewall.Extract(pkts[i], firewall.Advanced, 0)
					ri := firewall.Eval(rules, &v)
					rt := "policy"
					if ri >= 0 {
						rt = texts[ri]
					}
					t.Errorf("round %d packet %d: kernel accepted=%v srchain accepted=%v (srchain rule %d: %s)\n%x",
						round, i, got[i], want[i], ri, rt, pkts[i])
				}
			}
		}
		t.Logf("round %d: %d packets, %d accepted by both, %d mismatches", round, perRound, accepted, mismatches)
		if accepted == 0 || accepted == perRound {
			t.Errorf("round %d: %d of %d accepted: the round does not test both verdicts", round, accepted, perRound)
		}
		if mismatches > 0 {
			t.Logf("rules:\n%s", strings.Join(texts, "\n"))
		}
	}
	// Sanity: the test can fail. Each class's mutation (the reading
	// srchain had, or an easy wrong one) disagrees with the kernel on
	// some packets, so those rule forms really were decided by the
	// packets above.
	for c := fwNone + 1; c < fwClasses; c++ {
		t.Logf("mutation %q: %d packets decided unlike the kernel", fwClassNames[c], caught[c])
		if caught[c] == 0 {
			t.Errorf("mutation %q agrees with the kernel on every packet: the test does not exercise it", fwClassNames[c])
		}
	}
}

// fwCompareCounters requires `srchain firewall counters --json` (which
// reads the pinned counters of the running rule set, zeroed by Update)
// to report the packets and bytes ip6tables-legacy counted for every
// rule: bytes are IP bytes on both sides (no Ethernet header).
func fwCompareCounters(t *testing.T, ns *netns.NS, pin string, round int, texts []string) {
	t.Helper()
	if srchainBin == "" {
		t.Fatal("no srchain binary (TestMain could not build it)")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	out, err := ns.Run(ctx, "ip6tables-legacy-save", "-c", "-t", "raw")
	if err != nil {
		t.Fatalf("ip6tables-legacy-save: %v: %s", err, out)
	}
	type count struct{ Packets, Bytes uint64 }
	var kernel []count
	for _, line := range strings.Split(string(out), "\n") {
		var c count
		var rest string
		if _, err := fmt.Sscanf(line, "[%d:%d] -A SRCHAINFW %s", &c.Packets, &c.Bytes, &rest); err == nil {
			kernel = append(kernel, c)
		}
	}
	rules := filepath.Join(t.TempDir(), "rules")
	if err := os.WriteFile(rules, []byte(strings.Join(texts, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	js, err := exec.CommandContext(ctx, srchainBin, "firewall", "counters", "--pin", pin, "--rules", rules, "--json").Output()
	if err != nil {
		t.Fatalf("srchain firewall counters --json: %v", err)
	}
	var got struct {
		Mode  string
		Rules []struct {
			Rule int
			Text string
			count
		}
	}
	if err := json.Unmarshal(js, &got); err != nil {
		t.Fatalf("counters --json: %v\n%s", err, js)
	}
	if len(kernel) != len(texts) || len(got.Rules) != len(texts) || got.Mode != "advanced" {
		t.Fatalf("round %d: %d kernel counters, %d srchain counters (mode %q), %d rules", round, len(kernel), len(got.Rules), got.Mode, len(texts))
	}
	var pk uint64
	for i, k := range kernel {
		g := got.Rules[i]
		pk += k.Packets
		if g.count != k || g.Rule != i+1 || g.Text != texts[i] {
			t.Errorf("round %d rule %d %q: srchain %d packets %d bytes, ip6tables %d packets %d bytes", round, g.Rule, g.Text, g.Packets, g.Bytes, k.Packets, k.Bytes)
		}
	}
	if pk == 0 {
		t.Errorf("round %d: no rule counted a packet", round)
	}
}

// fwKernelTag rewrites --srh-tag for the kernel: ip6t_srh compares the
// wire's big-endian tag with the host-order value libip6t_srh stored, so
// on little-endian hosts `--srh-tag 1` matches a packet whose tag is
// 256. srchain compares the tag as the 16-bit network-order field RFC
// 8754 defines; the test byte-swaps the kernel's value to ask the same
// question.
func fwKernelTag(rule string) string {
	f := strings.Fields(rule)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "--srh-tag" {
			var v uint16
			fmt.Sscan(f[i+1], &v)
			f[i+1] = fmt.Sprint(fwHtons(v))
		}
	}
	return strings.Join(f, " ")
}

func fwHtons(v uint16) uint16 { return v<<8 | v>>8 }

func fwRestore(t *testing.T, ns *netns.NS, rules string) error {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	// The classic xtables semantics (see MACHINE-NOTES): the nf_tables
	// backend's ports read non-first fragments and its -p stops at AH.
	cmd := ns.Command(ctx, "ip6tables-legacy-restore")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ip6tables-legacy-restore: %v: %s", err, out)
	}
	return nil
}
