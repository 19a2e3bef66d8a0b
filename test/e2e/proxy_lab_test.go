package e2e

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/srchain/srchain/internal/bench"
	"github.com/srchain/srchain/internal/compile"
	"github.com/srchain/srchain/internal/kind"
	"github.com/srchain/srchain/internal/kinds/proxy"
	"github.com/srchain/srchain/internal/lab"
	"github.com/srchain/srchain/internal/legacynf"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/srv6"
	"github.com/srchain/srchain/internal/state"
	"github.com/srchain/srchain/internal/testutil"
)

// TestProxyLab deploys examples/proxy-testbed.yaml (SR proxies for
// legacy NFs, seed 001) and proves by the legacy NFs' own counters that
// they saw plain packets (no SRv6 behind End.AS/AD; the SRH behind
// End.AM) and by the end hosts that the chains went on: every probe, TCP
// through the stateful firewall behind two End.AD SIDs (handshake and
// data pass; a NEW connection from the outside is dropped and counted by
// nft), UDP through the NAT (the sink sees the NF's address), and the
// driver repairing a proxy link detached by hand. iperf3 TCP runs through
// End.AD, End.AS and End.AM with the hosts' segmentation offloads on.
func TestProxyLab(t *testing.T) {
	requireRoot(t)
	testutil.RequireTool(t, "nft")
	s, nw := proxyTestbed(t, "x")
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
	src, px, fw, sink := open("src"), open("proxy"), open("fw"), open("sink")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	// The proxy's neighbours resolved first: the behaviours under test
	// are the proxies', not the first packet's neighbour resolution
	// (bpf_redirect_neigh, docs/proxy.md Limits).
	for _, a := range []string{"fc00:a2::1", "fc00:a3::2"} {
		if _, err := px.Run(ctx, "ping", "-6", "-c", "1", "-W", "2", a); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("status", func(t *testing.T) {
		// Every node as desired: the proxy SIDs' blackhole routes, the
		// proxy programs and their SID table, the legacy NFs' tables and
		// rate limiter.
		sts, err := lab.Status(ctx, nw.Name, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range sts {
			if !st.OK() {
				t.Errorf("status %s: %v", st.Node, st.Problems)
			}
		}
	})

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

	t.Run("capture", func(t *testing.T) {
		// After the probes: each legacy NF counted the packets it took
		// in on the link from its proxy; behind End.AS/AD none carried
		// SRv6, behind End.AM (mon) they carry the SRH.
		for _, c := range []struct {
			node, ifname, fam string
			srv6              bool
		}{{"fw", "eth0", "ipv4", false}, {"nat", "eth0", "ipv4", false}, {"svc", "eth0", "ipv6", false}, {"mon", "eth0", "ipv6", true}} {
			cs := legacyCounters(t, ctx, nw, opts, c.node)
			in := cs["capture/in/"+c.ifname+"/"+c.fam]
			sr := cs["capture/in/"+c.ifname+"/srv6"]
			if in == 0 {
				t.Errorf("%s saw no %s packet on %s: %v", c.node, c.fam, c.ifname, cs)
			}
			if c.srv6 != (sr > 0) {
				t.Errorf("%s: %d SRv6 packets on %s, want SRv6 %v (%v)", c.node, sr, c.ifname, c.srv6, cs)
			}
		}
	})

	t.Run("tcp", func(t *testing.T) {
		before := proxyCounters(t, ctx, nw, opts, px)
		newIn := nftRuleCounter(t, fw, "iifname \"eth0\" ct state new")
		ln := anfListen(t, sink, "10.0.4.2:80")
		go anfEcho(ln)
		got, err := anfTCP(src, "10.0.4.2:80", "hello through End.AD")
		if err != nil || got != "hello through End.AD" {
			t.Fatalf("tcp through the firewall: %q, %v", got, err)
		}
		after := proxyCounters(t, ctx, nw, opts, px)
		// Both directions went through the firewall: out on fw-out,
		// the replies on fw-in, each back from the NF and on into SR.
		for _, k := range []string{"fw-out/sid/from-nf", "fw-in/sid/from-nf", "fw-out/sid/cache-hit", "fw-in/sid/cache-hit"} {
			if after[k] <= before[k] {
				t.Errorf("%s %d -> %d, want it to grow", k, before[k], after[k])
			}
		}
		if n := nftRuleCounter(t, fw, "iifname \"eth0\" ct state new"); n <= newIn {
			t.Errorf("nft counter of NEW from inside %d -> %d, want it to grow", newIn, n)
		}
	})

	t.Run("wrong-side", func(t *testing.T) {
		// A NEW connection from the outside (sink -> src, through fw-in)
		// is dropped by the firewall's ct state rule and counted.
		ln := anfListen(t, src, "10.0.1.1:22")
		go anfEcho(ln)
		dropped := nftRuleCounter(t, fw, "new from outside")
		if got, err := anfTCP(sink, "10.0.1.1:22", "x"); err == nil {
			t.Fatalf("connected from the outside (%q), want the firewall to drop it", got)
		}
		if n := nftRuleCounter(t, fw, "new from outside"); n <= dropped {
			t.Errorf("nft drop counter %d -> %d, want it to grow", dropped, n)
		}
	})

	t.Run("nat", func(t *testing.T) {
		// UDP through End.AD and a masquerading NF: the cache is keyed by
		// IFACE-IN, so the rewritten 5-tuple does not matter; the sink
		// sees the NF's address.
		pc := anfListenUDP(t, sink, "10.0.4.2:5353")
		seen := make(chan string, 1)
		go func() {
			buf := make([]byte, 100)
			_ = pc.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				seen <- err.Error()
				return
			}
			seen <- from.(*net.UDPAddr).IP.String()
		}()
		if err := src.Do(func() error {
			c, err := net.Dial("udp", "10.0.4.2:5353")
			if err != nil {
				return err
			}
			defer c.Close()
			_, err = c.Write([]byte("through the nat"))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if got := <-seen; got != "10.0.7.2" {
			t.Errorf("sink saw source %s, want the NF's masquerade address 10.0.7.2", got)
		}
	})

	t.Run("iperf3", func(t *testing.T) {
		// 10 s of TCP through each proxy with the hosts' segmentation
		// offloads on (TSO/GSO: the proxies see GSO packets of up to
		// 64 KB): IPv4 through the firewall's two End.AD SIDs (data
		// out, ACKs back), IPv6 through the End.AS service and its
		// 100 Mbit/s rate limiter, IPv6 with its SRH through the End.AM
		// monitor. A broken GSO path collapses to ~0.2 Mbit/s with
		// hundreds of retransmits (docs/proxy.md "MTU and GSO"); the
		// floors below are far under what each path carries here and
		// far above a collapse.
		testutil.RequireTool(t, "iperf3")
		testutil.RequireTool(t, "ethtool")
		for _, name := range []string{"src", "sink"} {
			out, err := open(name).Run(ctx, "ethtool", "-k", "eth0")
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"tcp-segmentation-offload: on", "generic-segmentation-offload: on"} {
				if !strings.Contains(out, f) {
					t.Fatalf("%s eth0: want %q (the test is about GSO packets):\n%s", name, f, out)
				}
			}
		}
		for _, c := range []struct {
			name, dst, port string
			floor, ceil     float64
		}{
			{"end.ad firewall", "10.0.4.2", "5201", 100e6, 0},
			// The service's tc tbf (100 Mbit/s on svc eth0) bounds it.
			{"end.as service", "fc00:a4::2", "5201", 50e6, 105e6},
			{"end.am monitor", "fc00:a4::2", "5202", 100e6, 0},
		} {
			bytes, rate, retr := proxyIperf(t, ctx, src, sink, c.dst, c.port)
			t.Logf("iperf3 TCP 10 s through %s: %.1f Mbit/s, %d retransmits", c.name, rate/1e6, retr)
			if rate < c.floor {
				t.Errorf("iperf3 through %s: %.1f Mbit/s (%.0f bytes in 10 s), want > %.0f Mbit/s", c.name, rate/1e6, bytes, c.floor/1e6)
			}
			if c.ceil > 0 && rate > c.ceil {
				t.Errorf("%.1f Mbit/s through %s, above its rate limiter", rate/1e6, c.name)
			}
		}
		if cs := legacyCounters(t, ctx, nw, opts, "svc"); cs["ratelimit/eth0/packets"] < 1000 {
			t.Errorf("svc rate limiter counted %d packets", cs["ratelimit/eth0/packets"])
		}
		for k, v := range proxyCounters(t, ctx, nw, opts, px) {
			if strings.Contains(k, "/drop/") && v > 0 {
				t.Errorf("counter %s = %d after iperf3", k, v)
			}
		}
	})

	t.Run("hop-limit", func(t *testing.T) {
		// After iperf3 (which wants no drop counted). An SR packet to
		// the End.AD SID fw-out with outer hop limit 1 (issue 34 item
		// 5): End's check (RFC 8986 4.1 S05) answers it with an ICMPv6
		// Time Exceeded from the SID, counted hop-limit; the firewall
		// never sees it and the sink never gets it (before, it went to
		// the NF, its header was cached with hop limit 1, and what the
		// NF handed back died at the proxy's forwarding, no counter
		// moving); TCP through the firewall goes on.
		proxyHopLimit(t, ctx, nw, opts, open("ingress"), px, src, sink)
	})

	t.Run("repair", func(t *testing.T) {
		// Detach the NF-side link of fw-out by hand: Check names it,
		// Apply puts it back, Check is clean again.
		d, _ := kind.DriverFor(proxy.Name)
		node, p := proxyProgram(t, nw, "fw-out")
		ifi, err := kind.Ifindexes(px, []string{"eth3"})
		if err != nil {
			t.Fatal(err)
		}
		lp := fmt.Sprintf("%s/link_%d_nf", proxy.PinDir(px), ifi[0])
		l, err := link.LoadPinnedLink(lp, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unpin(); err != nil {
			t.Fatal(err)
		}
		l.Close()
		drift, err := d.Check(ctx, px, node, p)
		if err != nil || len(drift) != 1 || !strings.Contains(drift[0], "srchain_proxy_nf not attached on eth3") {
			t.Fatalf("drift %q, %v", drift, err)
		}
		undo, err := d.Apply(ctx, px, node, p)
		if err != nil || undo == nil {
			t.Fatalf("repair: undo %v, %v", undo != nil, err)
		}
		if drift, err := d.Check(ctx, px, node, p); err != nil || len(drift) != 0 {
			t.Fatalf("after repair: %q, %v", drift, err)
		}
		if undo, err := d.Apply(ctx, px, node, p); err != nil || undo != nil {
			t.Fatalf("second apply: undo %v, %v (want nothing to do)", undo != nil, err)
		}
		// Remove fw-out alone (as when the NF leaves the spec): its SID
		// leaves the shared table and its IFACE-IN link goes, the other
		// proxies keep running; Apply brings both back.
		if err := d.Remove(ctx, px, node, p); err != nil {
			t.Fatal(err)
		}
		drift, err = d.Check(ctx, px, node, p)
		if err != nil || !strings.Contains(strings.Join(drift, "\n"), "sid fc00:2::1:0 missing from the proxy's SID table") || !strings.Contains(strings.Join(drift, "\n"), "srchain_proxy_nf not attached on eth3") {
			t.Fatalf("drift after remove %q, %v", drift, err)
		}
		_, in := proxyProgram(t, nw, "fw-in")
		if dr, err := d.Check(ctx, px, node, in); err != nil || len(dr) != 0 {
			t.Fatalf("fw-in after removing fw-out: %q, %v", dr, err)
		}
		if _, err := d.Apply(ctx, px, node, p); err != nil {
			t.Fatal(err)
		}
		if dr, err := d.Check(ctx, px, node, p); err != nil || len(dr) != 0 {
			t.Fatalf("fw-out after apply: %q, %v", dr, err)
		}
		ln := anfListen(t, sink, "10.0.4.2:8080")
		go anfEcho(ln)
		if got, err := anfTCP(src, "10.0.4.2:8080", "after repair"); err != nil || got != "after repair" {
			t.Errorf("tcp after repair: %q, %v", got, err)
		}
	})
}

func proxyProgram(t *testing.T, nw *state.Network, nf string) (state.Node, state.Program) {
	t.Helper()
	for _, n := range nw.Nodes {
		for _, p := range n.Programs {
			if p.Kind == proxy.Name && p.NF == nf {
				return n, p
			}
		}
	}
	t.Fatalf("no proxy program for %s", nf)
	return state.Node{}, state.Program{}
}

// proxyCounters reads every proxy NF's counters, keyed "<nf>/<counter>".
func proxyCounters(t *testing.T, ctx context.Context, nw *state.Network, opts lab.Options, px *netns.NS) map[string]uint64 {
	t.Helper()
	d, _ := kind.DriverFor(proxy.Name)
	out := map[string]uint64{}
	for _, n := range nw.Nodes {
		for _, p := range n.Programs {
			if p.Kind != proxy.Name {
				continue
			}
			cs, err := d.Counters(ctx, px, n, p)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cs {
				out[p.NF+"/"+c.Name] = c.Value
			}
		}
	}
	return out
}

// proxyTestbed loads examples/proxy-testbed.yaml plus one chain the
// example does not need: TCP to sink port 5202 through the End.AM
// monitor, so iperf3 can run through End.AM too.
func proxyTestbed(t *testing.T, tag string) (*spec.Spec, *state.Network) {
	t.Helper()
	const chain = "  - name: mon6tcp\n    ingress: ingress\n    egress: egress\n    match: {dst: [\"fc00:a4::/64\"], proto: tcp, dport: 5202}\n    nfs: [mon]\ntraffic:\n"
	return editedExample(t, "proxy-testbed.yaml", tag, [][2]string{{"traffic:\n", chain}})
}

// editedExample loads examples/file with each edit's first string (which
// must occur) replaced once by its second, and compiles it as lab tag.
func editedExample(t *testing.T, file, tag string, edits [][2]string) (*spec.Spec, *state.Network) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", file))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for _, r := range edits {
		if !strings.Contains(text, r[0]) {
			t.Fatalf("%s changed: no %q", file, r[0])
		}
		text = strings.Replace(text, r[0], r[1], 1)
	}
	path := filepath.Join(t.TempDir(), file)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := spec.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	nw, err := compile.Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	nw.Name = labName(tag)
	return s, nw
}

// legacyCounters reads a legacy NF node's capture counters.
func legacyCounters(t *testing.T, ctx context.Context, nw *state.Network, opts lab.Options, node string) map[string]uint64 {
	t.Helper()
	ns, err := lab.Open(nw.Name, node, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	d, _ := kind.DriverFor(legacynf.Program)
	for _, n := range nw.Nodes {
		if n.Name != node {
			continue
		}
		for _, p := range n.Programs {
			if p.Kind == legacynf.Program {
				cs, err := d.Counters(ctx, ns, n, p)
				if err != nil {
					t.Fatal(err)
				}
				out := map[string]uint64{}
				for _, c := range cs {
					out[c.Name] = c.Value
				}
				return out
			}
		}
	}
	t.Fatalf("no legacy-nf program on %s", node)
	return nil
}

// nftRuleCounter reads the packets of the first rule of table inet
// srchain_nf whose text contains what.
func nftRuleCounter(t *testing.T, ns *netns.NS, what string) int {
	t.Helper()
	out, err := ns.Run(context.Background(), "nft", "list", "table", "inet", legacynf.Table)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(out, "\n") {
		if !strings.Contains(l, what) {
			continue
		}
		f := strings.Fields(l)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "packets" {
				n, err := strconv.Atoi(f[i+1])
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
		}
	}
	t.Fatalf("no counted rule with %q:\n%s", what, out)
	return 0
}

// TestProxyFlowLab deploys the proxy testbed with every End.AD turned
// into End.AD.flow: the firewall, which forwards flows unchanged, still
// passes TCP both ways (each direction's flow has its own cache entry),
// while the NAT, which rewrites the source, misses the cache on the way
// back: the packet is dropped and counted, never sent on with a wrong
// header (docs/proxy.md "NAT and rewriting NFs").
func TestProxyFlowLab(t *testing.T) {
	requireRoot(t)
	testutil.RequireTool(t, "nft")
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "proxy-testbed.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(b), "behavior: end.ad,", "behavior: end.ad-flow,")
	text = strings.ReplaceAll(text, "behavior: end.ad}", "behavior: end.ad-flow, cache_size: 1024}")
	if strings.Count(text, "end.ad-flow") != 3 {
		t.Fatalf("example changed: %d End.AD NFs", strings.Count(text, "end.ad-flow"))
	}
	path := filepath.Join(t.TempDir(), "proxy-flow.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := spec.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	nw, err := compile.Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	nw.Name = labName("y")
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
	src, px, sink := open("src"), open("proxy"), open("sink")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for _, a := range []string{"fc00:a2::1", "fc00:a3::2"} {
		if _, err := px.Run(ctx, "ping", "-6", "-c", "1", "-W", "2", a); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("firewall", func(t *testing.T) {
		before := proxyCounters(t, ctx, nw, opts, px)
		ln := anfListen(t, sink, "10.0.4.2:80")
		go anfEcho(ln)
		if got, err := anfTCP(src, "10.0.4.2:80", "per flow"); err != nil || got != "per flow" {
			t.Fatalf("tcp through End.AD.flow: %q, %v", got, err)
		}
		after := proxyCounters(t, ctx, nw, opts, px)
		for _, k := range []string{"fw-out/sid/cache-hit", "fw-in/sid/cache-hit"} {
			if after[k] <= before[k] {
				t.Errorf("%s %d -> %d, want it to grow", k, before[k], after[k])
			}
		}
	})

	t.Run("nat-misses", func(t *testing.T) {
		before := proxyCounters(t, ctx, nw, opts, px)
		pc := anfListenUDP(t, sink, "10.0.4.2:5353")
		if err := src.Do(func() error {
			c, err := net.Dial("udp", "10.0.4.2:5353")
			if err != nil {
				return err
			}
			defer c.Close()
			_, err = c.Write([]byte("rewritten"))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		_ = pc.SetReadDeadline(time.Now().Add(2 * time.Second))
		if n, from, err := pc.ReadFrom(make([]byte, 64)); err == nil {
			t.Fatalf("sink got %d bytes from %v: a NAT behind End.AD.flow must miss the cache", n, from)
		}
		after := proxyCounters(t, ctx, nw, opts, px)
		if after["nat/sid/to-nf"] <= before["nat/sid/to-nf"] || after["nat/sid/cache-miss"] <= before["nat/sid/cache-miss"] || after["nat/sid/from-nf"] != before["nat/sid/from-nf"] {
			t.Errorf("nat counters before %v after %v: want to-nf and cache-miss to grow, from-nf not", pick(before, "nat/"), pick(after, "nat/"))
		}
		if after["nat/drop/proxy-flow-miss"] <= before["nat/drop/proxy-flow-miss"] {
			t.Errorf("drop/proxy-flow-miss %d -> %d", before["nat/drop/proxy-flow-miss"], after["nat/drop/proxy-flow-miss"])
		}
	})
}

func pick(m map[string]uint64, prefix string) map[string]uint64 {
	out := map[string]uint64{}
	for k, v := range m {
		if strings.HasPrefix(k, prefix) {
			out[k] = v
		}
	}
	return out
}

// proxyIperf runs iperf3 TCP for 10 s from src to dst:port (a server on sink)
// and returns the bytes received, the rate and the retransmits.
func proxyIperf(t *testing.T, ctx context.Context, src, sink *netns.NS, dst, port string) (bytes, rate float64, retransmits int) {
	t.Helper()
	r, err := bench.Iperf(ctx, src, sink, dst, port, 10)
	if err != nil {
		t.Fatal(err)
	}
	return r.Bytes, r.Gbps * 1e9, r.Retransmits
}

// proxyHopLimit sends, from the ingress router's eth1, the SR packet the
// ingress would send for a UDP datagram src -> sink (the chain through
// fw-out, segment list read from the ingress's route) but with outer
// hop limit 1, and checks the ICMPv6 Time Exceeded that comes back from
// the SID, the proxy's hop-limit counter, that the datagram reached
// neither the firewall nor the sink, and that TCP through the firewall
// still works.
func proxyHopLimit(t *testing.T, ctx context.Context, nw *state.Network, opts lab.Options, ing, px, src, sink *netns.NS) {
	const sid = "fc00:2::1:0" // fw-out (End.AD)
	// Chain web (TCP, fw-out) lives in its policy table.
	out, err := ing.Run(ctx, "ip", "-4", "route", "show", "table", "all", "10.0.4.0/24")
	if err != nil {
		t.Fatal(err)
	}
	var m []string
	for _, c := range regexp.MustCompile(`segs \d+ \[ ([0-9a-f:. ]+) \]`).FindAllStringSubmatch(out, -1) {
		if strings.HasPrefix(c[1], sid+" ") {
			m = c
		}
	}
	if m == nil {
		t.Fatalf("no ingress route to the sink through %s: %q", sid, out)
	}
	var travel []netip.Addr
	for _, f := range strings.Fields(m[1]) {
		travel = append(travel, netip.MustParseAddr(f))
	}
	macOf := func(ns *netns.NS, ifname string) (net.HardwareAddr, int) {
		t.Helper()
		var mac net.HardwareAddr
		var idx int
		if err := ns.Do(func() error {
			i, err := net.InterfaceByName(ifname)
			if err == nil {
				mac, idx = i.HardwareAddr, i.Index
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return mac, idx
	}
	ingMAC, ingIdx := macOf(ing, "eth1")
	pxMAC, _ := macOf(px, "eth0")
	pc := anfListenUDP(t, sink, "10.0.4.2:7077")
	got := make(chan int, 1)
	go func() {
		buf := make([]byte, 2000)
		_ = pc.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, _, _ := pc.ReadFrom(buf)
		got <- n
	}()
	inner := srv6.UDP4(netip.MustParseAddr("10.0.1.1"), netip.MustParseAddr("10.0.4.2"), 7000, 7077, []byte("hop limit 1"))
	pkt, err := srv6.EncapWith(srv6.EncapOptions{HopLimit: 1}, netip.MustParseAddr("fc00:a2::1"), travel, inner)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := endPacketSocket(ing, ingIdx)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	before := proxyCounters(t, ctx, nw, opts, px)
	fwNew := nftRuleCounter(t, legacyNS(t, nw, opts, "fw"), "iifname \"eth0\" ct state new")
	if _, err := unix.Write(fd, srv6.Ether(pxMAC, ingMAC, 0x86dd, pkt)); err != nil {
		t.Fatal(err)
	}
	// The Time Exceeded: from the SID to the outer source, quoting the packet.
	deadline := time.Now().Add(2 * time.Second)
	found := false
	buf := make([]byte, 4000)
	for !found && time.Now().Before(deadline) {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil || n < 14+48 || buf[12] != 0x86 || buf[13] != 0xdd {
			continue
		}
		ip := buf[14:n]
		if ip[6] == 58 && ip[40] == 3 && ip[41] == 0 &&
			netip.AddrFrom16([16]byte(ip[8:24])) == netip.MustParseAddr(sid) &&
			netip.AddrFrom16([16]byte(ip[24:40])) == netip.MustParseAddr("fc00:a2::1") {
			found = true
		}
	}
	if !found {
		t.Errorf("no ICMPv6 Time Exceeded from %s to fc00:a2::1 on the ingress's eth1", sid)
	}
	if n := <-got; n > 0 {
		t.Errorf("the sink got the hop limit 1 datagram (%d bytes)", n)
	}
	after := proxyCounters(t, ctx, nw, opts, px)
	if d := after["fw-out/drop/hop-limit"] - before["fw-out/drop/hop-limit"]; d != 1 {
		t.Errorf("drop/hop-limit grew by %d, want 1 (counters %v)", d, after)
	}
	if after["fw-out/sid/to-nf"] != before["fw-out/sid/to-nf"] {
		t.Errorf("fw-out sent the hop limit 1 packet to the firewall (to-nf %d -> %d)", before["fw-out/sid/to-nf"], after["fw-out/sid/to-nf"])
	}
	if n := nftRuleCounter(t, legacyNS(t, nw, opts, "fw"), "iifname \"eth0\" ct state new"); n != fwNew {
		t.Errorf("the firewall counted %d new connections from inside, want none", n-fwNew)
	}
	ln := anfListen(t, sink, "10.0.4.2:81")
	go anfEcho(ln)
	if got, err := anfTCP(src, "10.0.4.2:81", "after hop limit 1"); err != nil || got != "after hop limit 1" {
		t.Errorf("tcp through the firewall afterwards: %q, %v", got, err)
	}
}

// legacyNS opens the namespace of a legacy NF node of the lab.
func legacyNS(t *testing.T, nw *state.Network, opts lab.Options, node string) *netns.NS {
	t.Helper()
	ns, err := lab.Open(nw.Name, node, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Close)
	return ns
}
