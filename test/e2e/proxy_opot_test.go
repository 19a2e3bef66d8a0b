package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/srchain/srchain/internal/apply"
	"github.com/srchain/srchain/internal/bench"
	"github.com/srchain/srchain/internal/lab"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
	"github.com/srchain/srchain/internal/testutil"
)

// TestProxyOPoTLab: ordered proof of transit through SR proxies (seed
// 003 section IV, OPoT_proxy). examples/proxy-testbed.yaml with opot on
// the chains through the stateful firewall (web via End.AD fw-out,
// web-back via fw-in turned End.AD.flow) and through the End.AM monitor
// (mon6): the proxy router is a transit of each proof, the legacy NFs
// know nothing of it. The End.AD and End.AD.flow proxies do their
// transit themselves on the TLV they keep (their chains' entries are
// marked InEnd, so the stage leaves those packets alone: a proof that
// verifies is one the proxy updated); End.AM's TLV crosses the NF in the
// packet, and the stage in front of the proxy does it. Every probe passes and every packet of those
// chains verifies at its egress (TCP both ways through the firewall
// included); the proxies carried one TLV per packet and missed none; a
// packet the firewall node sends on its own, which never came from the
// SR side, is dropped by the proxy (proxy-opot-miss) instead of leaving
// with another packet's proof. The xdp run has the proxy router at
// `datapath: xdp`: the OPoT stage (mon6's transit) and the proxies (the
// others') then run in the node's XDP pipeline, OPoT first, and the
// proxy stage forwards packets at XDP. The tc run then has src send GSO
// packets into the chain (its segmentation offload back on): the
// headend drops them (opot-gso), and the verifier sees no replay.
func TestProxyOPoTLab(t *testing.T) {
	requireRoot(t)
	testutil.RequireTool(t, "nft")
	t.Run("tc", func(t *testing.T) { proxyOPoTLab(t, false) })
	t.Run("xdp", func(t *testing.T) { proxyOPoTLab(t, true) })
}

func proxyOPoTLab(t *testing.T, xdp bool) {
	s, nw := proxyOPoTTestbed(t, xdp)
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
	for _, a := range []string{"fc00:a2::1", "fc00:a3::2"} {
		if _, err := px.Run(ctx, "ping", "-6", "-c", "1", "-W", "2", a); err != nil {
			t.Fatal(err)
		}
	}
	// The proxies do the transits of web and web-back, the stage mon6's.
	for _, c := range opotConfig(t, nw, "proxy").Chains {
		if c.InEnd != (c.Name != "mon6") {
			t.Errorf("proxy node's transit of %s done in the proxy: %v", c.Name, c.InEnd)
		}
	}
	for _, n := range nw.Nodes {
		if n.Name != "proxy" {
			continue
		}
		if drift, err := apply.CheckPrograms(ctx, px, n); err != nil || len(drift) != 0 {
			t.Errorf("proxy node's programs: %q, %v", drift, err)
		}
	}
	// The transit stage runs before the proxy programs on the SR side.
	progs, err := apply.IngressPrograms(px, "eth0")
	if err != nil {
		t.Fatal(err)
	}
	if ti, pi := index(progs, "srchain_opot_t"), index(progs, "srchain_proxy_"); ti < 0 || pi < 0 || ti > pi {
		t.Fatalf("proxy eth0 tcx ingress runs %v: want the opot transit stage before the proxy", progs)
	}

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
	ln := anfListen(t, sink, "10.0.4.2:80")
	go anfEcho(ln)
	for i := range 5 {
		msg := strings.Repeat("proof through a legacy firewall ", i+1)
		if got, err := anfTCP(src, "10.0.4.2:80", msg); err != nil || got != msg {
			t.Fatalf("tcp %d through the firewall: %q, %v", i, got, err)
		}
	}

	// 5 s of TCP through the firewall's proxies: the proxies carry the
	// proof of every packet, from both CPUs (checked with the counters
	// below). The hosts send wire-sized packets (NoGSO: the headends can
	// prove no GSO packet), which the routers and the NF may aggregate
	// and segment again on the way.
	testutil.RequireTool(t, "iperf3")
	r, err := bench.Iperf(ctx, src, sink, "10.0.4.2", "5201", 5)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("iperf3 TCP 5 s through the firewall with OPoT: %.1f Mbit/s, %d retransmits", r.Gbps*1e3, r.Retransmits)
	if r.Gbps < 0.05 {
		t.Errorf("iperf3 through the firewall with OPoT: %.1f Mbit/s, want > 50", r.Gbps*1e3)
	}

	verdicts := func(node, chain string) (uint64, map[string]uint64) {
		t.Helper()
		pcs, err := lab.Counters(ctx, nw.Name, node, opts)
		if err != nil {
			t.Fatal(err)
		}
		var ok uint64
		drops := map[string]uint64{}
		for _, pc := range pcs {
			if pc.Program != state.ProgramOPoT {
				continue
			}
			for _, c := range pc.Counters {
				switch {
				case c.Name == "chain/"+chain+"/verified":
					ok = c.Value
				case strings.HasPrefix(c.Name, "chain/"+chain+"/drop/"):
					drops[strings.TrimPrefix(c.Name, "chain/"+chain+"/drop/")] += c.Value
				}
			}
		}
		return ok, drops
	}
	for _, c := range []struct{ node, chain string }{{"egress", "web"}, {"ingress", "web-back"}, {"egress", "mon6"}} {
		ok, drops := verdicts(c.node, c.chain)
		// The TCP exchanges alone are 5 connections of >= 4 packets each way.
		min := uint64(1)
		if c.chain != "mon6" {
			min = 20
		}
		t.Logf("chain %s: %d verified at %s", c.chain, ok, c.node)
		if ok < min || len(drops) != 0 {
			t.Errorf("chain %s at %s: %d verified, drops %v; want >= %d and none", c.chain, c.node, ok, drops, min)
		}
	}
	pc := proxyCounters(t, ctx, nw, opts, px)
	t.Logf("proxy: fw-out %v, fw-in %v", pick(pc, "fw-out/sid/opot"), pick(pc, "fw-in/sid/opot"))
	for _, nf := range []string{"fw-out", "fw-in"} {
		if pc[nf+"/sid/opot-save"] == 0 || pc[nf+"/sid/opot-miss"] != 0 {
			t.Errorf("%s: %d TLVs carried, %d missed; want > 0 and 0 (%v)", nf, pc[nf+"/sid/opot-save"], pc[nf+"/sid/opot-miss"], pick(pc, nf+"/"))
		}
	}

	// The firewall node sends a packet of its own out of its outside arm,
	// fw-out's IFACE-IN: no proof was kept for it, so the proxy drops it.
	webOK, _ := verdicts("egress", "web")
	missBefore := pc["fw-out/drop/proxy-opot-miss"]
	if _, err := fw.Run(ctx, "ping", "-c", "1", "-W", "1", "10.0.4.2"); err == nil {
		t.Error("a ping from the firewall node reached the sink")
	}
	pc = proxyCounters(t, ctx, nw, opts, px)
	if pc["fw-out/sid/opot-miss"] != 1 || pc["fw-out/drop/proxy-opot-miss"] != missBefore+1 {
		t.Errorf("fw-out after the firewall's own ping: opot-miss %d, drop/proxy-opot-miss %d (was %d); want 1 and one more",
			pc["fw-out/sid/opot-miss"], pc["fw-out/drop/proxy-opot-miss"], missBefore)
	}
	if ok, drops := verdicts("egress", "web"); ok != webOK || len(drops) != 0 {
		t.Errorf("chain web after the injection: %d verified (was %d), drops %v", ok, webOK, drops)
	}
	if xdp {
		proxyOPoTXDP(t, ctx, nw, opts)
		return
	}

	// src as a sender whose GSO packets reach the headend whole (the
	// compiler turned its segmentation offload off, NoGSO): the headend
	// drops them, and no proof reaches the verifier twice. (TCP may still
	// get the message through: after a timeout it sends one segment per
	// packet.)
	if out, err := src.Run(ctx, "ethtool", "-K", "eth0", "tso", "on", "gso", "on"); err != nil {
		t.Fatalf("ethtool: %v\n%s", err, out)
	}
	msg := strings.Repeat("a GSO packet cannot carry one proof per segment ", 400)
	got, err := anfTCP(src, "10.0.4.2:80", msg)
	t.Logf("20 KB of TCP from a GSO sender: %d bytes back, %v", len(got), err)
	_, hd := verdicts("ingress", "web")
	if ok, drops := verdicts("egress", "web"); hd["opot-gso"] == 0 || len(drops) != 0 {
		t.Errorf("after GSO packets: headend drops %v, want opot-gso; verifier %d verified, drops %v, want none", hd, ok, drops)
	}
}

// proxyOPoTXDP checks that the proxy router ran its stages at XDP,
// OPoT before the proxy, and that the proxy stage forwarded packets.
func proxyOPoTXDP(t *testing.T, ctx context.Context, nw *state.Network, opts lab.Options) {
	t.Helper()
	sts, err := lab.Status(ctx, nw.Name, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range sts {
		if st.Node == "proxy" && !slices.Equal(st.Notes, []string{"xdp pipeline: opot -> proxy"}) {
			t.Errorf("proxy node notes %q, want the xdp pipeline opot -> proxy", st.Notes)
		}
	}
	pcs, err := lab.Counters(ctx, nw.Name, "proxy", opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, pc := range pcs {
		if pc.Program != state.ProgramPipeline {
			continue
		}
		for _, c := range pc.Counters {
			if c.Name == "stage/proxy/redirect" {
				t.Logf("the proxy stage redirected %d packets at XDP", c.Value)
				if c.Value < 20 {
					t.Errorf("the proxy stage redirected %d packets at XDP, want >= 20", c.Value)
				}
				return
			}
		}
	}
	t.Error("no stage/proxy/redirect counter on the proxy node")
}

// proxyOPoTTestbed is examples/proxy-testbed.yaml with opot on web,
// web-back and mon6, and fw-in as End.AD.flow; with xdp the proxy router
// is `datapath: xdp`.
func proxyOPoTTestbed(t *testing.T, xdp bool) (*spec.Spec, *state.Network) {
	t.Helper()
	tag, router := "o", [2]string{"{name: proxy, role: router,", "{name: proxy, role: router,"}
	if xdp {
		tag, router[1] = "ox", "{name: proxy, role: router, datapath: xdp,"
	}
	return editedExample(t, "proxy-testbed.yaml", tag, [][2]string{router,
		{"    nfs: [fw-out]\n", "    nfs: [fw-out]\n    opot: true\n"},
		{"    nfs: [fw-in]\n", "    nfs: [fw-in]\n    opot: true\n"},
		{"    nfs: [mon]\n", "    nfs: [mon]\n    opot: true\n"},
		{"behavior: end.ad, to_nf: eth3, from_nf: eth2", "behavior: end.ad-flow, to_nf: eth3, from_nf: eth2"},
		// The SR links carry a 1500-byte inner packet, the outer header
		// of two SIDs and the proof's TLV with the route's PadN: 1612
		// bytes (spec Overhead), more than the 1600 of the example.
		{"  - mtu: 1600", "  - mtu: 1700"}, {"  - mtu: 1600", "  - mtu: 1700"}, {"  - mtu: 1600", "  - mtu: 1700"},
	})
}
