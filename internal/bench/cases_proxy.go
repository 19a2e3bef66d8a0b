package bench

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/opotdp"
	"github.com/srchain/srchain/internal/pipeline"
	"github.com/srchain/srchain/internal/proxydp"
	"github.com/srchain/srchain/internal/srv6"
)

// The SR proxy scenario (issue 9, seed 001 section 5): a round trip
// through a trivial forwarding NF, a namespace of its own hanging off the
// DUT by one veth (one-armed: the same link both ways, IPv6 forwarding,
// default route back to the DUT). The same NF is reached by plain IPv6
// routing (the baseline), by the kernel workaround End.DX6 -> NF ->
// H.Encaps, and by srchain's proxies (internal/proxydp) at tc and with
// the SR side at XDP.

// The NF link: nf0 on the DUT, eth0 in the NF's namespace.
const (
	ifDUTNF = "nf0"
	ifNF    = "eth0"
)

var (
	// DUTNF6 is the DUT's address on the NF link, NFAddr6 the NF's.
	DUTNF6  = netip.MustParseAddr("fc00:34::2")
	NFAddr6 = netip.MustParseAddr("fc00:34::3")
)

// proxyFrame is what every SR case of the scenario sends: the service
// SID, then fc00:6::e, which the DUT routes to the sink once the NF is
// done (End.AD's next segment, End.AS's pushed segment, End.AM's SRH[0],
// the workaround's re-encapsulation).
func proxyFrame(sid uint16) FrameSpec { return FrameSpec{Encap: []netip.Addr{SID(sid), ReEncap6}} }

// nfName is the NF namespace of the DUT's line: the DUT's name with -n
// for -d, so CleanupStale's prefix covers it.
func nfName(dut string) string { return strings.TrimSuffix(dut, "-d") + "-n" }

// addNF creates the NF namespace and its link to the DUT (removed with
// the line's cleanups, also when a later step fails) and returns the
// DUT's ifindex of the link.
func addNF(ctx context.Context, d *DUT) (int, error) {
	nf, err := netns.Create(nfName(d.NS.Name))
	if err != nil {
		return 0, fmt.Errorf("create nf namespace: %w", err)
	}
	d.Defer(nf.Delete)
	if err := veth(d.NS, ifDUTNF, nf, ifNF); err != nil {
		return 0, err
	}
	if err := nf.Sysctl("net.ipv6.conf.all.forwarding", "1"); err != nil {
		return 0, err
	}
	dutMAC, idx, err := linkInfo(d.NS, ifDUTNF)
	if err != nil {
		return 0, err
	}
	nfMAC, _, err := linkInfo(nf, ifNF)
	if err != nil {
		return 0, err
	}
	// Permanent neighbours both ways: no ND during a measurement, and the
	// XDP proxy's FIB lookup of the NF's address resolves from the start.
	// The default route's gateway is a global address, so the NF's
	// one-armed forwarding never sends a redirect (the kernel only
	// redirects to link-local targets).
	for _, c := range []struct {
		ns   *netns.NS
		args []string
	}{
		{d.NS, []string{"addr", "add", DUTNF6.String() + "/64", "dev", ifDUTNF, "nodad"}},
		{d.NS, []string{"link", "set", ifDUTNF, "up"}},
		{d.NS, []string{"-6", "neigh", "replace", NFAddr6.String(), "lladdr", nfMAC.String(), "dev", ifDUTNF, "nud", "permanent"}},
		{nf, []string{"addr", "add", NFAddr6.String() + "/64", "dev", ifNF, "nodad"}},
		{nf, []string{"link", "set", ifNF, "up"}},
		{nf, []string{"link", "set", "lo", "up"}},
		{nf, []string{"-6", "neigh", "replace", DUTNF6.String(), "lladdr", dutMAC.String(), "dev", ifNF, "nud", "permanent"}},
		{nf, []string{"-6", "route", "add", "default", "via", DUTNF6.String(), "dev", ifNF}},
	} {
		if _, err := c.ns.Run(ctx, "ip", c.args...); err != nil {
			return 0, err
		}
	}
	// NAPI on the NF's end: an XDP redirect into a veth is dropped
	// without it (MACHINE-NOTES); on for every case so they all pay the
	// same receive path.
	if err := nf.SetGRO(ifNF, true); err != nil {
		return 0, fmt.Errorf("enable gro in nf: %w", err)
	}
	return idx, nil
}

// CaseNFPlain reaches the NF by plain IPv6 routing: what comes in on in0
// goes to the NF (policy routing), what comes back is routed to the sink.
var CaseNFPlain = Case{
	Name: "nf-plain", Desc: "plain IPv6 routed through the NF (ip rule iif in0 -> NF -> sink)",
	Setup: func(ctx context.Context, d *DUT) error {
		if _, err := addNF(ctx, d); err != nil {
			return err
		}
		return d.IPs(ctx,
			"-6 route add default via "+NFAddr6.String()+" dev "+ifDUTNF+" table 100",
			"-6 rule add iif "+ifDUTIn+" lookup 100 pref 100",
		)
	},
}

// CaseNFXDPFwd is nf-plain forwarded at XDP on both of the DUT's sides
// (in0 -> NF, NF -> sink; bare FIB lookup + redirect, bpf/bench/xdpfwd.c,
// which honours the ip rule): the scenario's XDP ceiling, the least work
// a DUT does to send each packet through the NF and on. A case's CPU cost
// over it is what its proxy work costs per packet.
var CaseNFXDPFwd = Case{
	Name: "nf-xdp-fwd", Desc: "nf-plain forwarded by a bare XDP FIB redirect on in0 and nf0: the XDP ceiling",
	XDP: true,
	Setup: func(ctx context.Context, d *DUT) error {
		if err := CaseNFPlain.Setup(ctx, d); err != nil {
			return err
		}
		var objs xdpfwdObjects
		if err := loadXdpfwdObjects(&objs, nil); err != nil {
			return fmt.Errorf("load xdpfwd: %w", err)
		}
		d.Defer(objs.Close)
		if err := attachXDP(d, objs.Xdpfwd); err != nil {
			return err
		}
		nf, err := d.Index(ifDUTNF)
		if err != nil {
			return err
		}
		return d.NS.Do(func() error {
			l, err := link.AttachXDP(link.XDPOptions{Program: objs.Xdpfwd, Interface: nf})
			if err != nil {
				return fmt.Errorf("attach xdp: %w", err)
			}
			d.Defer(l.Close)
			return nil
		})
	},
}

// CaseProxyWorkaround is the kernel-only way to put an SR-unaware NF in
// a chain: End.DX6 to the NF, and on the way back a rule for the NF's
// link into a table whose route H.Encaps towards the next segment.
var CaseProxyWorkaround = Case{
	Name: "workaround", Desc: "kernel End.DX6 -> NF -> ip rule iif nf0 -> H.Encaps (1 SID)",
	// End.DX6 wants SL 0 (RFC 8986 section 4.5; the kernel drops the
	// rest silently): the chain ends at the SID and the H.Encaps route
	// puts the rest (fc00:6::e) back on.
	Frame: FrameSpec{Encap: []netip.Addr{SID(0x1d6)}},
	Setup: func(ctx context.Context, d *DUT) error {
		if _, err := addNF(ctx, d); err != nil {
			return err
		}
		return d.IPs(ctx,
			"-6 route add "+SID(0x1d6).String()+"/128 encap seg6local action End.DX6 nh6 "+NFAddr6.String()+" dev "+ifDUTIn,
			"-6 route add fc00:5::/64 encap seg6 mode encap segs "+ReEncap6.String()+" via "+SinkAddr6.String()+" dev "+ifDUTOut+" table 101",
			"-6 rule add iif "+ifDUTNF+" lookup 101 pref 100",
		)
	},
}

// proxyAt is where a proxy case runs the proxy.
type proxyAt int

const (
	proxyTC    proxyAt = iota // srchain_proxy_sr on in0, srchain_proxy_nf on nf0
	proxyTwins                // and their XDP twins attached alone (Proxy.AttachXDP)
	// and the node's XDP pipeline: the dispatcher on in0 and nf0, the
	// proxy stage srchain_proxy_xdp behind it, as `datapath: xdp`
	// deploys it (docs/pipeline.md)
	proxyPipeline
)

// proxyCase is srchain's proxy with behaviour b on SID sid, at at. flows
// > 1 varies the inner source per packet over that many flows.
func proxyCase(name, desc string, b proxydp.Behavior, sid uint16, at proxyAt, flows int) Case {
	c := Case{
		Name: name, Desc: desc, Frame: proxyFrame(sid), XDP: at != proxyTC, Flows: flows,
		Setup: func(ctx context.Context, d *DUT) error { return proxyDUT(ctx, d, b, sid, at, flows, nil) },
	}
	if b == proxydp.BehaviorADFlow && at == proxyTC {
		c.X, c.Series = float64(max(flows, 1)), "end.ad-flow"
	}
	return c
}

// proxyDUT sets the proxy case up. opot, the OPoT maps of a chain whose
// transit entry on the SID is marked for the proxy, has the proxy carry
// each packet's TLV across the NF and do the transit on it (as the
// drivers set it up: docs/opot.md "Transit in the proxy"); nil: no OPoT.
func proxyDUT(ctx context.Context, d *DUT, b proxydp.Behavior, sid uint16, at proxyAt, flows int, opot map[string]*ebpf.Map) error {
	nfIdx, err := addNF(ctx, d)
	if err != nil {
		return err
	}
	in, err := d.Index(ifDUTIn)
	if err != nil {
		return err
	}
	// A packet for the SID that the program does not take is dropped,
	// never routed around the NF (docs/proxy.md).
	if err := d.IP(ctx, "-6", "route", "add", "blackhole", SID(sid).String()+"/128"); err != nil {
		return err
	}
	var pipe *pipeline.Maps
	o := proxydp.Options{FlowCapacity: max(proxydp.DefaultFlowCapacity, 2*flows), OPoT: opot} // twice the flows: the cache holds every flow of the run
	if at == proxyPipeline {
		if pipe, err = pipeline.OpenMaps(""); err != nil {
			return err
		}
		d.Defer(pipe.Close)
		o.Pipeline = pipe.Replacements()
	}
	p, err := proxydp.Load(o)
	if err != nil {
		return err
	}
	d.Defer(p.Close)
	s := proxydp.SID{
		Addr: SID(sid), Behavior: b, OutIfindex: nfIdx, InIfindex: nfIdx,
		NFNext6: NFAddr6, Inner: proxydp.ProtoIPv6, OPoT: opot != nil,
	}
	if b == proxydp.BehaviorAS {
		s.Source, s.Segments = DUTOut6, []netip.Addr{ReEncap6}
	}
	if err := p.SetSIDs([]proxydp.SID{s}); err != nil {
		return err
	}
	return d.NS.Do(func() error {
		if err := p.Attach(in, false, ""); err != nil {
			return err
		}
		if err := p.Attach(nfIdx, true, ""); err != nil {
			return err
		}
		switch at {
		case proxyTwins:
			if err := p.AttachXDP(in, false, ""); err != nil {
				return err
			}
			return p.AttachXDP(nfIdx, true, "")
		case proxyPipeline:
			return proxyPipelineDUT(d, p, pipe, in, nfIdx)
		}
		return nil
	})
}

// proxyPipelineDUT makes p's stage the XDP pipeline of in (the SR side)
// and nf (IFACE-IN) behind the dispatcher, as the proxy and pipeline
// drivers do.
func proxyPipelineDUT(d *DUT, p *proxydp.Proxy, m *pipeline.Maps, in, nf int) error {
	if err := p.SetSRSide([]int{in}); err != nil {
		return err
	}
	if err := m.Set(map[pipeline.Stage]*ebpf.Program{pipeline.Proxy: p.StageProgram()}); err != nil {
		return err
	}
	disp, err := pipeline.LoadDispatcher(m)
	if err != nil {
		return err
	}
	d.Defer(disp.Close)
	for _, i := range []int{in, nf} {
		l, err := link.AttachXDP(link.XDPOptions{Program: disp, Interface: i})
		if err != nil {
			return fmt.Errorf("attach dispatcher: %w", err)
		}
		d.Defer(l.Close)
	}
	return nil
}

// The OPoT cases (issue 11: through the proxy >= 0.9x the proxy alone;
// seed 003's OPoT_proxy): End.AD on frames that carry the TLV a 3-node
// chain's headend made (the DUT is node 1), without OPoT (end.ad-tlv:
// the proxy alone, the TLV cached with the header) and with it
// (end.ad-opot: the proxy carrying each packet's TLV across the NF and
// doing the node's transit on it, its chain entry marked for the proxy
// as the OPoT driver marks it). The frames
// differ per packet (the inner source over proxyOPoTFlows flows, as real
// traffic's packets differ): the proxy keys each kept TLV by the inner
// packet, and identical packets in flight at once share one entry
// (docs/proxy.md "OPoT through a proxy"), which the generator's repeated
// template would hit with every batch.
const (
	proxyOPoTSID   = 0x1a6
	proxyOPoTFlows = 1024
)

func proxyOPoTFrame() FrameSpec {
	f := proxyFrame(proxyOPoTSID)
	if _, m, err := opotTransitMeta(3); err == nil {
		f.TLVs = []srv6.TLV{m.SRv6TLV()}
	}
	return f
}

var (
	CaseProxyADTLV = Case{
		Name: "end.ad-tlv", Desc: "srchain End.AD (tc), frames with an OPoT TLV, no OPoT: the proxy alone",
		Frame: proxyOPoTFrame(), Flows: proxyOPoTFlows,
		Setup: func(ctx context.Context, d *DUT) error {
			return proxyDUT(ctx, d, proxydp.BehaviorAD, proxyOPoTSID, proxyTC, 0, nil)
		},
	}
	CaseProxyADOPoT = Case{
		Name: "end.ad-opot", Desc: "srchain End.AD (tc) with OPoT: the proxy does the transit on the TLV it carries across the NF",
		Frame: proxyOPoTFrame(), Flows: proxyOPoTFlows,
		Setup: func(ctx context.Context, d *DUT) error {
			o, err := opotTransitStages(d, 3, nil, SID(proxyOPoTSID), ReEncap6)
			if err != nil {
				return err
			}
			if err := opotdp.SetInEnd(o, ReEncap6); err != nil {
				return err
			}
			return proxyDUT(ctx, d, proxydp.BehaviorAD, proxyOPoTSID, proxyTC, 0, opotdp.EndMapsOf(o))
		},
	}
)

// CaseNFPlainFlows is nf-plain with the inner source varied over as
// many flows as the largest End.AD.flow case: the path's own cost of
// many flows (the NF's and the DUT's kernel forwarding of the plain
// packets), without a proxy, to read end.ad-flow-100k / end.ad-flow
// against (docs/benchmarks.md "Proxy").
var CaseNFPlainFlows = func() Case {
	c := CaseNFPlain
	n := proxyFlowCounts[len(proxyFlowCounts)-1]
	c.Name, c.Flows = "nf-plain-"+flowLabel(n), n
	c.Desc = fmt.Sprintf("nf-plain, the inner source varied over %d flows (the path's share of the per-flow cost)", n)
	return c
}()

// Flow counts of the per-flow proxy cases.
var proxyFlowCounts = []int{1, 1000, 100000}

func proxyCases() []Case {
	cs := []Case{
		CasePlain, CaseNFPlain, CaseNFXDPFwd, CaseProxyWorkaround,
		proxyCase("end.as", "srchain End.AS (tc), 1 segment pushed", proxydp.BehaviorAS, 0x1a1, proxyTC, 0),
		proxyCase("end.ad", "srchain End.AD (tc)", proxydp.BehaviorAD, 0x1a2, proxyTC, 0),
		proxyCase("end.am", "srchain End.AM (tc)", proxydp.BehaviorAM, 0x1a3, proxyTC, 0),
	}
	for _, n := range proxyFlowCounts {
		name := "end.ad-flow"
		if n > 1 {
			name = fmt.Sprintf("end.ad-flow-%s", flowLabel(n))
		}
		cs = append(cs, proxyCase(name, fmt.Sprintf("srchain End.AD.flow (tc), %d flows", n), proxydp.BehaviorADFlow, 0x1a5, proxyTC, n))
	}
	cs = append(cs, CaseNFPlainFlows)
	return append(cs,
		proxyCase("end.as-xdp", "srchain End.AS at XDP (both sides)", proxydp.BehaviorAS, 0x1a1, proxyTwins, 0),
		proxyCase("end.ad-xdp", "srchain End.AD at XDP (both sides)", proxydp.BehaviorAD, 0x1a2, proxyTwins, 0),
		proxyCase("end.am-xdp", "srchain End.AM at XDP (both sides)", proxydp.BehaviorAM, 0x1a3, proxyTwins, 0),
		proxyCase("end.ad-pipe", "srchain End.AD in the node's XDP pipeline (dispatcher + proxy stage, both sides), as datapath: xdp deploys it",
			proxydp.BehaviorAD, 0x1a2, proxyPipeline, 0),
		CaseProxyADTLV, CaseProxyADOPoT,
	)
}

// flowLabel is 1000 -> 1k, 100000 -> 100k.
func flowLabel(n int) string {
	if n >= 1000 && n%1000 == 0 {
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

func init() {
	Register(&Scenario{
		Name: "proxy", Baseline: CaseNFPlain.Name, Ceiling: CaseNFXDPFwd.Name, XLabel: "flows",
		Desc:  "seed 001: round trip through a forwarding NF: plain routing (also by a bare XDP forward, the ceiling), kernel End.DX6 -> NF -> H.Encaps, srchain End.AS/AD/AM/AD.flow at tc, End.AS/AD/AM at XDP, End.AD in the XDP pipeline",
		Cases: proxyCases(),
		// Issue 9 (and 11, through the proxy with OPoT).
		Goals: []Goal{
			{"end.as", CaseNFPlain.Name, 0.9}, {"end.ad", CaseNFPlain.Name, 0.9}, {"end.am", CaseNFPlain.Name, 0.9},
			{"end.as", CaseProxyWorkaround.Name, 1.2}, {"end.ad", CaseProxyWorkaround.Name, 1.2}, {"end.am", CaseProxyWorkaround.Name, 1.2},
			{"end.ad-flow-1k", "end.ad-flow", 0.9}, {"end.ad-flow-100k", "end.ad-flow", 0.9},
			{CaseProxyADOPoT.Name, CaseProxyADTLV.Name, 0.9},
		},
	})
}
