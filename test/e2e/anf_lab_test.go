package e2e

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/srchain/srchain/internal/bench"
	"github.com/srchain/srchain/internal/nft"
	"io"
	"net"
	"net/netip"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/srchain/srchain/internal/kind"
	"github.com/srchain/srchain/internal/kinds/netfilter"
	"github.com/srchain/srchain/internal/lab"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/srv6"
	"github.com/srchain/srchain/internal/state"
	"github.com/srchain/srchain/internal/testutil"
)

// TestANFLab deploys examples/anf-testbed.yaml (End.AN.NF, seed 002) and
// proves by what the end hosts and the nodes' counters saw that the
// node's real netfilter acts on the inner packets while the chain goes
// on: the probes, TCP through the SID, a forbidden NEW connection dropped
// and counted by nft, UDP through SNAT and back, two SIDs that differ
// only in ARG meeting different rules, many flows with distinct segment
// lists from both CPUs at once, iperf3 TCP for 10 s, a ruleset nft
// rejects leaving the old one running, and an insert-mode chain
// (anfInsert).
func TestANFLab(t *testing.T) {
	requireRoot(t)
	testutil.RequireTool(t, "nft")
	s, nw := example(t, "anf-testbed.yaml", "n")
	opts := up(t, nw)
	open := func(node string) *netns.NS {
		t.Helper()
		ns, err := lab.Open(nw.Name, node, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(ns.Close)
		return ns
	}
	src, ing, nfv, egr, sink := open("src"), open("ingress"), open("nfv"), open("egress"), open("sink")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	t.Run("probes", func(t *testing.T) {
		pr, err := lab.NewProber(nw.Name, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer pr.Close()
		for _, p := range probes(s) {
			if res, trace := run(t, pr, p); !res.OK {
				t.Errorf("probe %s: %s\n%s", p.Name, res.Why, trace)
			}
		}
	})

	t.Run("tcp", func(t *testing.T) {
		ln := anfListen(t, sink, "10.0.4.2:80")
		go anfEcho(ln)
		got, err := anfTCP(src, "10.0.4.2:80", "hello through End.AN.NF")
		if err != nil || got != "hello through End.AN.NF" {
			t.Fatalf("tcp through the SID: %q, %v", got, err)
		}
		// A NEW connection to port 23 under ARG 0x1111 is dropped by
		// the ruleset (chain remote_access) and counted by nft.
		ln23 := anfListen(t, sink, "10.0.4.2:23")
		go anfEcho(ln23)
		before := anfNftCounter(t, nfv, "remote_access", "tcp dport 23")
		if _, err := anfTCP(src, "10.0.4.2:23", "x"); err == nil {
			t.Fatal("telnet connected, want it dropped by the ruleset")
		}
		if after := anfNftCounter(t, nfv, "remote_access", "tcp dport 23"); after <= before {
			t.Errorf("nft counter of the telnet drop %d -> %d, want it to grow", before, after)
		}
	})

	t.Run("snat", func(t *testing.T) {
		// The sink sees the translated source; its reply goes back
		// through the chain (to-src4, the same NF) and reaches src.
		pc := anfListenUDP(t, sink, "10.0.4.2:5353")
		seen := make(chan string, 1)
		go func() {
			buf := make([]byte, 100)
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				seen <- err.Error()
				return
			}
			seen <- from.(*net.UDPAddr).IP.String()
			_, _ = pc.WriteTo(buf[:n], from)
		}()
		reply, err := anfUDP(src, "10.0.4.2:5353", "ping")
		if got := <-seen; got != "10.0.1.99" {
			t.Errorf("sink saw source %s, want the SNAT address 10.0.1.99", got)
		}
		if err != nil || reply != "ping" {
			t.Errorf("reply through the chain: %q, %v", reply, err)
		}
	})

	t.Run("args", func(t *testing.T) {
		// The same NF SID with ARG 0x2222 instead of 0x1111 (a host
		// route at the ingress, more specific than the chain's): the
		// ruleset sends it to rate_limit, not remote_access, so telnet
		// connects.
		if _, err := ing.Run(ctx, "ip", "route", "add", "10.0.4.2/32", "encap", "seg6", "mode", "encap", "segs", "fc00:2::f1:2222,fc00:3::1:0", "dev", "eth1"); err != nil {
			t.Fatal(err)
		}
		defer func() { _, _ = ing.Run(context.Background(), "ip", "route", "del", "10.0.4.2/32") }()
		ln := anfListen(t, sink, "10.0.4.2:2323")
		go anfEcho(ln)
		if got, err := anfTCP(src, "10.0.4.2:2323", "arg 2222"); err != nil || got != "arg 2222" {
			t.Fatalf("tcp under ARG 0x2222: %q, %v", got, err)
		}
		ln23 := anfListen(t, sink, "10.0.4.2:23")
		go anfEcho(ln23)
		if got, err := anfTCP(src, "10.0.4.2:23", "telnet ok"); err != nil || got != "telnet ok" {
			t.Errorf("telnet under ARG 0x2222 (no remote_access rules): %q, %v", got, err)
		}
	})

	t.Run("fragments", func(t *testing.T) {
		anfFragments(t, ctx, nw, opts, src, egr, sink)
	})

	t.Run("insert", func(t *testing.T) {
		anfInsert(t, ctx, src, ing, nfv, egr, sink)
	})

	t.Run("flows", func(t *testing.T) {
		anfFlows(t, ctx, ing, egr, sink, src)
	})

	t.Run("iperf3", func(t *testing.T) {
		// IPv4 inner: its GSO packets take srchain_anf_fwd (the sender's
		// seg6 encapsulation state survives the decapsulation here).
		anfIperf(t, ctx, src, sink, "10.0.4.2", 10)
		// Big TCP segments crossed as GSO packets: nothing dropped by the
		// datapath for size or state.
		for _, c := range anfCounters(t, ctx, nw, opts) {
			if strings.HasPrefix(c.Name, "drop/") && c.Name != "drop/anf-no-slot" {
				t.Errorf("counter %s = %d after iperf3", c.Name, c.Value)
			}
		}
	})

	t.Run("iperf3-insert", func(t *testing.T) {
		// IPv6 through the insert-mode chain: GSO packets lose and
		// regain their SRH (docs/netfilter.md "Insert mode"). MSS 1300:
		// the SRH (40 bytes) stays up to the sink, whose link carries
		// 1500 bytes, and the egress's Packet Too Big (MTU 1500) would
		// not make src's 1500-byte packets any smaller.
		anfIperf(t, ctx, src, sink, "fc00:a4::101", 3, "-M", "1300")
		for _, c := range anfCounters(t, ctx, nw, opts) {
			if strings.HasPrefix(c.Name, "drop/") && c.Name != "drop/anf-no-slot" {
				t.Errorf("counter %s = %d after iperf3", c.Name, c.Value)
			}
		}
	})

	t.Run("bad-ruleset", func(t *testing.T) {
		var node state.Node
		var prog state.Program
		for _, n := range nw.Nodes {
			for _, p := range n.Programs {
				if p.Kind == netfilter.Name {
					node, prog = n, p
				}
			}
		}
		cfg, err := netfilter.Decode(prog)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Ruleset = "chain forward {\n  type filter hook forward priority filter;\n  tcp dport 22 frobnicate\n}\n"
		prog.Config, _ = json.Marshal(cfg)
		d, _ := kind.DriverFor(netfilter.Name)
		_, err = d.Apply(ctx, nfv, node, prog)
		var ne *nft.Error
		if !errors.As(err, &ne) || ne.Line != 3 {
			t.Fatalf("apply of a bad ruleset: %v, want an nft error at ruleset line 3", err)
		}
		out, err := nfv.Run(ctx, "nft", "list", "chain", "inet", netfilter.Table, "remote_access")
		if err != nil || !strings.Contains(out, "tcp dport 23") {
			t.Errorf("the old ruleset no longer runs: %v\n%s", err, out)
		}
		ln := anfListen(t, sink, "10.0.4.2:80")
		go anfEcho(ln)
		if _, err := anfTCP(src, "10.0.4.2:80", "still"); err != nil {
			t.Errorf("traffic after the refused ruleset: %v", err)
		}
	})
}

// anfInsert proves the insert-mode chain to-sink6-insert (H.Insert at the
// ingress, End.AN.NF on nfv, fc00:a4::100/120) by what the sink and nft
// on nfv saw: netfilter gets the original packet (DA = the final
// destination, no SRH: rules on the SID or the SRH count nothing), a
// packet it accepts arrives with its payload and the SRH (SL 0,
// segment 0 = DA = the final destination, hop limit lowered once per
// router), a drop rule on the final destination drops and counts, a DNAT
// of the final destination rewrites segment 0 and the reply comes back
// translated (conntrack sees both directions: the way back is the encap
// chain to-src6 through the same NF), also with a SID after the NF's
// (segment 0 carries the DNAT'd destination to the End that makes it
// the DA), and TCP connects.
func anfInsert(t *testing.T, ctx context.Context, src, ing, nfv, egr, sink *netns.NS) {
	const final, natTo = "fc00:a4::101", "fc00:a4::2"
	script := `table inet anfinsert {
 chain pre {
  type filter hook prerouting priority -400;
  meta mark & 0x80000000 != 0 ip6 nexthdr 43 counter
  meta mark & 0x80000000 != 0 ip6 daddr fc00:2::f1:0/112 counter
  meta mark & 0x80000000 != 0 ip6 daddr ` + final + ` counter
 }
 chain natpre {
  type nat hook prerouting priority dstnat;
  ip6 daddr ` + final + ` udp dport 7003 counter dnat ip6 to ` + natTo + `
  ip6 daddr fc00:a4::103 udp dport 7004 counter dnat ip6 to ` + final + `
 }
 chain filterfwd {
  type filter hook forward priority filter - 1;
  ip6 daddr ` + final + ` udp dport 7002 counter drop
 }
}
`
	cmd := nfv.Command(ctx, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft on nfv: %v\n%s", err, out)
	}
	defer func() { _, _ = nfv.Run(context.Background(), "nft", "delete", "table", "inet", "anfinsert") }()
	counter := func(chain, what string) int {
		t.Helper()
		out, err := nfv.Run(ctx, "nft", "list", "chain", "inet", "anfinsert", chain)
		if err != nil {
			t.Fatal(err)
		}
		re := regexp.MustCompile(`counter packets (\d+)`)
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, what) {
				if m := re.FindStringSubmatch(l); m != nil {
					n, _ := strconv.Atoi(m[1])
					return n
				}
			}
		}
		t.Fatalf("no counted rule with %q in chain %s:\n%s", what, chain, out)
		return 0
	}

	var ifindex int
	if err := sink.Do(func() error {
		i, err := net.InterfaceByName("eth0")
		if err == nil {
			ifindex = i.Index
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	fd, err := endPacketSocket(sink, ifindex)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	// captured returns the SR packets from src that the sink's eth0 has
	// seen since the last call (all are queued before the datagram that
	// the caller waited for reaches its socket).
	captured := func() []srv6.Packet {
		var ps []srv6.Packet
		buf := make([]byte, 9000)
		for {
			n, _, err := unix.Recvfrom(fd, buf, 0)
			if err != nil || n <= 0 {
				return ps
			}
			p, err := srv6.Decode(buf[:n], true)
			if err == nil && p.SRH != nil && p.Outer.Src == netip.MustParseAddr("fc00:a1::1") {
				ps = append(ps, p)
			}
		}
	}
	recv := func(pc net.PacketConn) (string, net.Addr) {
		t.Helper()
		_ = pc.SetReadDeadline(time.Now().Add(3 * time.Second))
		buf := make([]byte, 200)
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return "", nil
		}
		return string(buf[:n]), from
	}
	// checkSRH: the SR packet to port at the sink has DA = segment 0
	// = dst, SL 0, the segment list [dst, more..., the NF's SID] and hop
	// limit 61: src 64, ingress (forward + H.Insert) 63, nfv (End.AN.NF:
	// once) 62, egress (forward, or End) 61.
	checkSRH := func(what, dst string, port uint16, more ...string) {
		t.Helper()
		found := false
		want := []netip.Addr{netip.MustParseAddr(dst)}
		for _, m := range more {
			want = append(want, netip.MustParseAddr(m))
		}
		want = append(want, netip.MustParseAddr("fc00:2::f1:1111"))
		for _, p := range captured() {
			if p.L4 == nil || p.L4.DstPort != port {
				continue
			}
			found = true
			if p.SRH.SegmentsLeft != 0 || !slices.Equal(p.SRH.Segments, want) || p.Outer.Dst != want[0] || p.Outer.HopLimit != 61 {
				t.Errorf("%s: the sink got DA %s hop limit %d, SRH SL %d segments %v; want DA = segment 0 = %s, SL 0, segments %v, hop limit 61",
					what, p.Outer.Dst, p.Outer.HopLimit, p.SRH.SegmentsLeft, p.SRH.Segments, want[0], want)
			}
		}
		if !found {
			t.Errorf("%s: no SR packet to port %d captured at the sink", what, port)
		}
	}

	preSRH0, preSID0 := counter("pre", "nexthdr"), counter("pre", "fc00:2::f1:0/112")
	preFinal0 := counter("pre", "daddr "+final)

	// Accepted: the payload arrives, with the SRH as the chain left it.
	// nfv forgets its neighbours first: the restore must resolve the
	// next hop (a packet queued by bpf_redirect_neigh at the restore
	// device's egress used to leave with srcanf0's MAC, lost).
	if _, err := nfv.Run(ctx, "ip", "-6", "neigh", "flush", "dev", "eth1"); err != nil {
		t.Fatal(err)
	}
	ok := anfListenUDP(t, sink, "["+final+"]:7001")
	captured()
	if _, err := anfUDPSend(src, "["+final+"]:7001", "insert accepted"); err != nil {
		t.Fatal(err)
	}
	if got, _ := recv(ok); got != "insert accepted" {
		t.Fatalf("sink got %q on %s:7001, want the datagram", got, final)
	}
	checkSRH("accepted", final, 7001)

	// Dropped by a rule on the final destination, and counted.
	dropped := anfListenUDP(t, sink, "["+final+"]:7002")
	before := counter("filterfwd", "dport 7002")
	if _, err := anfUDPSend(src, "["+final+"]:7002", "insert dropped"); err != nil {
		t.Fatal(err)
	}
	// A datagram netfilter accepts, sent after it, arrives first: the
	// dropped one would have been ahead of it.
	if _, err := anfUDPSend(src, "["+final+"]:7001", "marker"); err != nil {
		t.Fatal(err)
	}
	if got, _ := recv(ok); got != "marker" {
		t.Fatalf("marker datagram: %q", got)
	}
	_ = dropped.SetReadDeadline(time.Now())
	if n, _, err := dropped.ReadFrom(make([]byte, 100)); err == nil {
		t.Errorf("the sink received %d bytes on port 7002, want them dropped on nfv", n)
	}
	if after := counter("filterfwd", "dport 7002"); after != before+1 {
		t.Errorf("nft drop rule on the final destination counted %d -> %d, want +1", before, after)
	}

	// DNAT of the final destination: segment 0 and DA become natTo; the
	// reply comes back from the original destination.
	natted := anfListenUDP(t, sink, "["+natTo+"]:7003")
	captured()
	done := make(chan string, 1)
	go func() {
		got, from := recv(natted)
		if from != nil {
			_, _ = natted.WriteTo([]byte("reply "+got), from)
		}
		done <- got
	}()
	reply, err := anfUDP(src, "["+final+"]:7003", "insert dnat")
	if got := <-done; got != "insert dnat" {
		t.Fatalf("DNAT target %s:7003 got %q, want the datagram", natTo, got)
	}
	if err != nil || reply != "reply insert dnat" {
		t.Errorf("reply to the DNAT'd datagram (from %s, un-NATed by conntrack): %q, %v", final, reply, err)
	}
	checkSRH("dnat", natTo, 7003)

	// A SID after the NF's (a kernel End on egress, by hand): the NF
	// leaves SL 1, DA = that SID and the DNAT'd destination in segment
	// 0, which egress's End then makes the DA.
	const far, endSID = "fc00:a4::103", "fc00:3::ee"
	if _, err := egr.Run(ctx, "ip", "-6", "route", "add", endSID+"/128", "encap", "seg6local", "action", "End", "dev", "eth0"); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = egr.Run(context.Background(), "ip", "-6", "route", "del", endSID+"/128") }()
	if _, err := ing.Run(ctx, "ip", "-6", "route", "add", far+"/128", "encap", "seg6", "mode", "inline", "segs", "fc00:2::f1:1111,"+endSID, "dev", "eth1"); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = ing.Run(context.Background(), "ip", "-6", "route", "del", far+"/128") }()
	twice := anfListenUDP(t, sink, "["+final+"]:7004")
	captured()
	go func() {
		got, from := recv(twice)
		if from != nil {
			_, _ = twice.WriteTo([]byte("reply "+got), from)
		}
		done <- got
	}()
	reply, err = anfUDP(src, "["+far+"]:7004", "two sids")
	if got := <-done; got != "two sids" {
		t.Fatalf("DNAT target %s:7004 behind a second SID got %q, want the datagram", final, got)
	}
	if err != nil || reply != "reply two sids" {
		t.Errorf("reply (from %s, un-NATed by conntrack): %q, %v", far, reply, err)
	}
	checkSRH("dnat, then End", final, 7004, endSID)

	// TCP through the insert chain (the way back is to-src6).
	ln := anfListen(t, sink, "["+final+"]:80")
	go anfEcho(ln)
	if got, err := anfTCP(src, "["+final+"]:80", "tcp insert"); err != nil || got != "tcp insert" {
		t.Errorf("tcp through the insert chain: %q, %v", got, err)
	}

	// What netfilter saw: the original packets, never the SRH or the SID.
	if n := counter("pre", "nexthdr") - preSRH0; n != 0 {
		t.Errorf("netfilter saw %d inner packets with an SRH, want 0", n)
	}
	if n := counter("pre", "fc00:2::f1:0/112") - preSID0; n != 0 {
		t.Errorf("netfilter saw %d inner packets to the SID, want 0", n)
	}
	if n := counter("pre", "daddr "+final) - preFinal0; n < 4 {
		t.Errorf("netfilter saw %d packets to the final destination %s, want >= 4", n, final)
	}
}

// anfIperf runs iperf3 TCP for secs seconds from src to addr on sink
// and fails when it moved less than 1 MB a second: a broken GSO path
// moves a few kilobytes (retransmitted MSS-sized segments), a thousandth
// of what this path carries.
func anfIperf(t *testing.T, ctx context.Context, src, sink *netns.NS, addr string, secs int, args ...string) {
	t.Helper()
	testutil.RequireTool(t, "iperf3")
	r, err := bench.Iperf(ctx, src, sink, addr, "5201", secs, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("iperf3 TCP %d s to %s through End.AN.NF: %.2f Gbit/s, %d retransmits", secs, addr, r.Gbps, r.Retransmits)
	if r.Bytes < float64(secs)*1e6 {
		t.Errorf("iperf3 moved %.0f bytes in %d s: the GSO path is broken", r.Bytes, secs)
	}
}

// anfUDPSend sends one datagram from ns.
func anfUDPSend(ns *netns.NS, addr, msg string) (int, error) {
	var n int
	err := ns.Do(func() error {
		c, err := net.Dial("udp", addr)
		if err != nil {
			return err
		}
		defer c.Close()
		n, err = io.WriteString(c, msg)
		return err
	})
	return n, err
}

// anfFlows sends many UDP flows at once from both CPUs, each with its
// own segment list (the NF SID with ARG 0x100+i, one destination
// address per flow), and checks at the egress, before it decapsulates,
// that every packet's outer SRH names the ARG of its own flow: a stash
// mix-up would put one flow's outer header on another's inner packet.
func anfFlows(t *testing.T, ctx context.Context, ing, egr, sink, src *netns.NS) {
	const flows = 8
	const perFlow = 400
	var rules []string
	for i := range flows {
		dst := fmt.Sprintf("10.0.4.%d", 20+i)
		if _, err := sink.Run(ctx, "ip", "addr", "add", dst+"/32", "dev", "eth0"); err != nil {
			t.Fatal(err)
		}
		if _, err := ing.Run(ctx, "ip", "route", "add", dst+"/32", "encap", "seg6", "mode", "encap", "segs", fmt.Sprintf("fc00:2::f1:%x,fc00:3::1:0", 0x100+i), "dev", "eth1"); err != nil {
			t.Fatal(err)
		}
		// Outer IPv6 (40) + SRH (8) + segment[0] (16): segment[1]'s last
		// 16 bits at byte 78 = bit 624; the inner IPv4 destination's last
		// octet at 40 + 8 + 32 + 19 = byte 99 = bit 792.
		rules = append(rules,
			fmt.Sprintf("ip6 nexthdr 43 @nh,624,16 0x%x counter", 0x100+i),
			fmt.Sprintf("ip6 nexthdr 43 @nh,624,16 0x%x @nh,792,8 != %d counter", 0x100+i, 20+i))
	}
	script := "table inet anfcheck {\n chain pre {\n  type filter hook prerouting priority -300;\n  " + strings.Join(rules, "\n  ") + "\n }\n}\n"
	cmd := egr.Command(ctx, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft on egress: %v\n%s", err, out)
	}
	defer func() { _, _ = egr.Run(context.Background(), "nft", "delete", "table", "inet", "anfcheck") }()

	var wg sync.WaitGroup
	for cpu := range min(runtime.NumCPU(), 2) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = src.Do(func() error {
				var set unix.CPUSet
				set.Set(cpu)
				_ = unix.SchedSetaffinity(0, &set)
				conns := make([]net.Conn, flows)
				for i := range flows {
					c, err := net.Dial("udp", fmt.Sprintf("10.0.4.%d:9", 20+i))
					if err != nil {
						return err
					}
					defer c.Close()
					conns[i] = c
				}
				for n := 0; n < perFlow; n++ {
					for _, c := range conns {
						_, _ = c.Write([]byte("flow"))
					}
				}
				return nil
			})
		}()
	}
	wg.Wait()
	time.Sleep(500 * time.Millisecond)
	out, err := egr.Run(ctx, "nft", "list", "chain", "inet", "anfcheck", "pre")
	if err != nil {
		t.Fatal(err)
	}
	argRe := regexp.MustCompile(`@nh,624,16 (0x[0-9a-f]+)`)
	cntRe := regexp.MustCompile(`counter packets (\d+)`)
	total, seen := 0, 0
	for _, l := range strings.Split(out, "\n") {
		a, c := argRe.FindStringSubmatch(l), cntRe.FindStringSubmatch(l)
		if a == nil || c == nil {
			continue
		}
		n, _ := strconv.Atoi(c[1])
		if strings.Contains(l, "!=") {
			if n != 0 {
				t.Errorf("flow ARG %s: %d packets carried another flow's inner destination", a[1], n)
			}
			continue
		}
		seen++
		if n == 0 {
			t.Errorf("flow ARG %s: no packet reached the egress", a[1])
		}
		total += n
	}
	if seen != flows {
		t.Errorf("found the counters of %d flows in the egress's check table, want %d:\n%s", seen, flows, out)
	}
	t.Logf("%d packets of %d flows from %d CPUs reached the egress, each with its own segment list", total, flows, min(runtime.NumCPU(), 2))
}

func anfListen(t *testing.T, ns *netns.NS, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	if err := ns.Do(func() (err error) { ln, err = net.Listen("tcp", addr); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

func anfListenUDP(t *testing.T, ns *netns.NS, addr string) net.PacketConn {
	t.Helper()
	var pc net.PacketConn
	if err := ns.Do(func() (err error) { pc, err = net.ListenPacket("udp", addr); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return pc
}

// anfEcho echoes one line per connection.
func anfEcho(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			line, _ := bufio.NewReader(c).ReadString('\n')
			_, _ = io.WriteString(c, line)
		}()
	}
}

// anfTCP connects from ns, sends msg and returns the echo.
func anfTCP(ns *netns.NS, addr, msg string) (string, error) {
	var c net.Conn
	if err := ns.Do(func() (err error) { c, err = net.DialTimeout("tcp", addr, 2*time.Second); return err }); err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, msg+"\n"); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSuffix(line, "\n"), err
}

// anfUDP sends msg from ns and returns the reply.
func anfUDP(ns *netns.NS, addr, msg string) (string, error) {
	var c net.Conn
	if err := ns.Do(func() (err error) { c, err = net.Dial("udp", addr); return err }); err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.WriteString(c, msg); err != nil {
		return "", err
	}
	buf := make([]byte, 100)
	n, err := c.Read(buf)
	return string(buf[:n]), err
}

// anfNftCounter reads the packet counter of the first rule of chain
// (table inet srchain_anf) whose text contains what.
func anfNftCounter(t *testing.T, ns *netns.NS, chain, what string) int {
	t.Helper()
	out, err := ns.Run(context.Background(), "nft", "list", "chain", "inet", netfilter.Table, chain)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`counter packets (\d+)`)
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, what) {
			if m := re.FindStringSubmatch(l); m != nil {
				n, _ := strconv.Atoi(m[1])
				return n
			}
		}
	}
	t.Fatalf("no counted rule with %q in chain %s:\n%s", what, chain, out)
	return 0
}

func anfCounters(t *testing.T, ctx context.Context, nw *state.Network, opts lab.Options) []kind.Counter {
	t.Helper()
	ns, err := lab.Open(nw.Name, "nfv", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	d, _ := kind.DriverFor(netfilter.Name)
	for _, n := range nw.Nodes {
		for _, p := range n.Programs {
			if p.Kind == netfilter.Name {
				cs, err := d.Counters(ctx, ns, n, p)
				if err != nil {
					t.Fatal(err)
				}
				return cs
			}
		}
	}
	t.Fatal("no netfilter program in the lab")
	return nil
}

// anfFragments sends ping -s 3000 over IPv4 and IPv6 from src through
// the example's chains to-sink4 / to-sink6 (the ruleset uses conntrack,
// so nfv reassembles each inner datagram and fragments it again before
// the restore) and back (to-src4 / to-src6, the same NF): every echo is
// answered, every piece that reaches the egress carries the chain's
// outer header (End applied on nfv: DA = the egress SID = segment[SL],
// SL 0, the NF's SID in the list) and the pieces of each datagram add up
// to the whole ICMP message, and nfv counts no anf-stale drop (issue 34
// item 4: the first piece used to consume the slot, the others were
// dropped as stale and the pings lost 100%); and a 3000-byte UDP
// datagram through the ruleset's SNAT and back.
func anfFragments(t *testing.T, ctx context.Context, nw *state.Network, opts lab.Options, src, egr, sink *netns.NS) {
	testutil.RequireTool(t, "ping")
	const size, count = 3000, 3
	counter := func(name string) uint64 {
		for _, c := range anfCounters(t, ctx, nw, opts) {
			if c.Name == name {
				return c.Value
			}
		}
		return 0
	}
	var ifindex int
	if err := egr.Do(func() error {
		i, err := net.InterfaceByName("eth0")
		if err == nil {
			ifindex = i.Index
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	nfSID := netip.MustParseAddr("fc00:2::f1:1111")
	for _, tc := range []struct {
		name, dst string
		inner     int
	}{
		{"ipv4", "10.0.4.2", 4},
		{"ipv6", "fc00:a4::2", 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fd, err := endPacketSocket(egr, ifindex)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)
			stale, kept := counter("drop/anf-stale"), counter("stash/fragments-kept")
			out, err := src.Run(ctx, "ping", "-c", strconv.Itoa(count), "-s", strconv.Itoa(size), "-i", "0.2", "-W", "3", tc.dst)
			if err != nil || !strings.Contains(out, fmt.Sprintf("%d received", count)) {
				t.Errorf("ping -s %d %s through End.AN.NF with conntrack: %v\n%s", size, tc.dst, err, out)
			}
			// The pieces of the echo requests at the egress (the
			// replies take the other direction).
			bytesByID := map[uint32]int{}
			pieces := 0
			buf := make([]byte, 9000)
			for {
				n, _, err := unix.Recvfrom(fd, buf, 0)
				if err != nil || n <= 0 {
					break
				}
				p, err := srv6.Decode(buf[:n], true)
				if err != nil || p.SRH == nil || p.InnerOff < 0 {
					continue
				}
				var id uint32
				var frag int
				switch {
				case tc.inner == 4 && p.Inner4 != nil && p.Inner4.Protocol == srv6.ProtoICMP &&
					p.Inner4.Src == netip.MustParseAddr("10.0.1.1") && (p.Inner4.Flags&1 != 0 || p.Inner4.FragOff != 0):
					id = uint32(p.Inner4.ID)
					frag = int(p.Inner4.TotalLen) - p.Inner4.HeaderLen()
				case tc.inner == 6 && p.Inner6 != nil && p.Inner6.NextHeader == srv6.ProtoFragment &&
					p.Inner6.Src == netip.MustParseAddr("fc00:a1::1"):
					fh := buf[p.InnerOff+srv6.IPv6HeaderLen:]
					if fh[0] != srv6.ProtoICMPv6 {
						continue
					}
					id = binary.BigEndian.Uint32(fh[4:])
					frag = int(p.Inner6.PayloadLen) - 8
				default:
					continue
				}
				pieces++
				sl := int(p.SRH.SegmentsLeft)
				if sl != 0 || p.Outer.Dst != p.SRH.Segments[sl] || !slices.Contains(p.SRH.Segments, nfSID) {
					t.Errorf("piece of datagram %#x at the egress: outer DA %s, SL %d, segments %v; want End applied on nfv (SL 0, DA = segment[0], %s in the list)",
						id, p.Outer.Dst, sl, p.SRH.Segments, nfSID)
				}
				bytesByID[id] += frag
			}
			if len(bytesByID) != count {
				t.Errorf("fragmented echo requests at the egress: %d datagrams (%d pieces), want %d", len(bytesByID), pieces, count)
			}
			for id, n := range bytesByID {
				if n != size+8 {
					t.Errorf("datagram %#x: its pieces at the egress carry %d bytes, want %d (ICMP header + %d)", id, n, size+8, size)
				}
			}
			if d := counter("drop/anf-stale") - stale; d != 0 {
				t.Errorf("drop/anf-stale grew by %d during the pings", d)
			}
			if counter("stash/fragments-kept") <= kept {
				t.Errorf("stash/fragments-kept did not grow: the pieces were not re-fragmented behind conntrack")
			}
			t.Logf("%s: %d echo requests left nfv in %d pieces, each with its outer header", tc.name, len(bytesByID), pieces)
		})
	}
	t.Run("no-conntrack", func(t *testing.T) {
		// A ruleset without ct or NAT: nothing reassembles, each
		// fragment is its own SR packet with its own slot, restored
		// from it; the non-last ones leave their slots live (kept).
		var node state.Node
		var prog state.Program
		for _, n := range nw.Nodes {
			for _, p := range n.Programs {
				if p.Kind == netfilter.Name {
					node, prog = n, p
				}
			}
		}
		cfg, err := netfilter.Decode(prog)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Ruleset = "chain forward {\n  type filter hook forward priority filter; policy accept;\n  meta mark & 0x80000000 != 0 counter accept\n}\n"
		plain := prog
		plain.Config, _ = json.Marshal(cfg)
		d, _ := kind.DriverFor(netfilter.Name)
		nfv, err := lab.Open(nw.Name, "nfv", opts)
		if err != nil {
			t.Fatal(err)
		}
		defer nfv.Close()
		if _, err := d.Apply(ctx, nfv, node, plain); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if _, err := d.Apply(context.Background(), nfv, node, prog); err != nil {
				t.Errorf("restore the example's ruleset: %v", err)
			}
		}()
		for _, dst := range []string{"10.0.4.2", "fc00:a4::2"} {
			stale, kept := counter("drop/anf-stale"), counter("stash/fragments-kept")
			out, err := src.Run(ctx, "ping", "-c", strconv.Itoa(count), "-s", strconv.Itoa(size), "-i", "0.2", "-W", "3", dst)
			if err != nil || !strings.Contains(out, fmt.Sprintf("%d received", count)) {
				t.Errorf("ping -s %d %s through End.AN.NF without conntrack: %v\n%s", size, dst, err, out)
			}
			if d := counter("drop/anf-stale") - stale; d != 0 {
				t.Errorf("%s: drop/anf-stale grew by %d", dst, d)
			}
			// Two non-last fragments per datagram, each way.
			if d := counter("stash/fragments-kept") - kept; d < 2*2*count {
				t.Errorf("%s: stash/fragments-kept grew by %d, want >= %d (each non-last fragment restored from its own slot)", dst, d, 2*2*count)
			}
		}
		if n := anfNftCounter(t, nfv, "forward", "meta mark"); n < 2*2*3*count {
			t.Errorf("the conntrack-free ruleset counted %d inner packets, want every fragment (>= %d)", n, 2*2*3*count)
		}
	})
	t.Run("snat", func(t *testing.T) {
		// A 3000-byte UDP datagram to port 5353: SNAT'd by the ruleset
		// (conntrack reassembles it first), re-fragmented, restored
		// piece by piece; the echo comes back through the same NF
		// (un-NAT'd, also fragmented).
		stale := counter("drop/anf-stale")
		pc := anfListenUDP(t, sink, "10.0.4.2:5353")
		seen := make(chan string, 1)
		go func() {
			buf := make([]byte, 9000)
			_ = pc.SetReadDeadline(time.Now().Add(5 * time.Second))
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				seen <- err.Error()
				return
			}
			seen <- fmt.Sprintf("%s %d", from.(*net.UDPAddr).IP, n)
			_, _ = pc.WriteTo(buf[:n], from)
		}()
		msg := strings.Repeat("x", size)
		var c net.Conn
		if err := src.Do(func() (err error) { c, err = net.Dial("udp", "10.0.4.2:5353"); return err }); err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, msg); err != nil {
			t.Fatal(err)
		}
		if got, want := <-seen, fmt.Sprintf("10.0.1.99 %d", size); got != want {
			t.Errorf("sink saw %q, want the SNAT source and the whole datagram %q", got, want)
		}
		buf := make([]byte, 9000)
		if n, err := c.Read(buf); err != nil || n != size {
			t.Errorf("reply through the chain: %d bytes, %v; want %d", n, err, size)
		}
		if d := counter("drop/anf-stale") - stale; d != 0 {
			t.Errorf("drop/anf-stale grew by %d", d)
		}
	})
}
