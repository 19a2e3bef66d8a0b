package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/srchain/srchain/internal/apply"
	"github.com/srchain/srchain/internal/datapath"
	"github.com/srchain/srchain/internal/ingress"
	"github.com/srchain/srchain/internal/opot"
	"github.com/srchain/srchain/internal/opotdp"
	"github.com/srchain/srchain/internal/srv6"
	"github.com/srchain/srchain/internal/state"
)

// Ordered proof of transit (issue 11, seed 003 section V, docs/opot.md):
// each OPoT stage of bpf/opot.c in front of (or behind) the behaviour it
// accompanies, against that behaviour alone, on the same frames.
//
//   - transit: srchain's eBPF End vs the transit stage + the same End, on
//     frames carrying the TLV as the chain's headend made it (the DUT is
//     the first NF node); for k = 3, 5, 7 nodes (only the profile
//     changes: a transit's work does not depend on k, its share is
//     pre-evaluated); and the kernel's End vs the stage + the kernel's
//     End. (Until bpf/opot.c passes with TC_ACT_UNSPEC, its TC_ACT_OK
//     ends the tcx chain and the eBPF End behind the stage never runs:
//     the kernel's End route does the End; docs/benchmarks.md "OPoT".)
//   - verifier: kernel End.DT6 vs the verify stage + End.DT6, the DUT the
//     chain's last node; every frame must verify and be fresh for the
//     anti-replay window (see opotVerifyFrame).
//   - headend: kernel H.Encaps vs H.Encaps + the headend stage at tc
//     egress of the DUT's egress (grow the SRH by the TLV, fill it), and
//     vs srchain's eBPF ingress writing the TLV as it encapsulates, tc
//     (opot-ingress-tc) and XDP (opot-ingress-xdp); ingress-tc is that
//     ingress without OPoT, for what the TLV costs it.
//
// The bench's profiles come from a seeded stream (opotProfile): they are
// test material, the same frames every run, never a chain's keys.

// opotID is the profile (chain) number of the bench's chains.
const opotID = 11

// opotSlot is the profile slot the frames name.
const opotSlot = 0

// opotProfile returns the bench's deterministic profile of k nodes.
func opotProfile(k int) (*opot.Profile, error) {
	var seed [32]byte
	copy(seed[:], "srchain bench opot")
	seed[31] = byte(k)
	p, err := opot.GenerateFrom(rand.NewChaCha8(seed), k)
	if err != nil {
		return nil, fmt.Errorf("make bench opot profile: %w", err)
	}
	return p, nil
}

// opotTransitSegs is the transit frames' segment list: the DUT's End SID,
// then the chain's egress SID (the inner destination, routed to the
// sink), as CaseEnd's.
var opotTransitSegs = sids(0x100, 0)

// opotTransitMeta is the TLV the chain's headend (node 0 of the k-node
// profile) puts on its first packet, which the DUT (node 1) receives.
func opotTransitMeta(k int) (*opot.Profile, opot.Meta, error) {
	p, err := opotProfile(k)
	if err != nil {
		return nil, opot.Meta{}, err
	}
	h, err := opot.NewHeadend(p, opotSlot)
	if err != nil {
		return nil, opot.Meta{}, fmt.Errorf("make bench opot frame: %w", err)
	}
	m, err := h.Next(0x1abcd)
	if err != nil {
		return nil, opot.Meta{}, fmt.Errorf("make bench opot frame: %w", err)
	}
	return p, m, nil
}

// opotTransitFrame is the transit case's frame for a k-node chain.
func opotTransitFrame(k int) FrameSpec {
	_, m, err := opotTransitMeta(k)
	if err != nil {
		// Only a broken profile generator gets here; the frame then
		// carries no TLV, and TestOPoTScenario fails.
		return FrameSpec{Encap: opotTransitSegs}
	}
	return FrameSpec{Encap: opotTransitSegs, TLVs: []srv6.TLV{m.SRv6TLV()}}
}

// The verifier.
//
// The verifier's anti-replay window drops a frame seen before, and the
// generator repeats its templates, so every frame must carry a new
// sequence number: the generator writes its per-packet counter (FlowOffset
// mechanism, Case.CounterOffset) into bytes 1..4 of the masked RND, i.e.
// bits 55..24 of RND, which are sequence bits (sequence = RND >> 17). The
// CML must then verify for every RND, which a real profile does not allow
// (the verifier's CML depends on RND through the other nodes' terms). The
// verifier's parameters are therefore those of a real profile's last node
// with LPC = 1, and d^r's bits 63..24 cleared: then the check
// CML + (Share + RND) LPC == RND + s holds for CML = s - Share whatever RND
// is, and RND's counter bytes are the sequence bits unmasked. The stage
// runs exactly the same instructions as with any other key values (the
// multiply and reductions have no data-dependent loop); the window slides
// by two 64-bit blocks per packet (sequence step 128), a little more work
// than a real headend's step of 1.

// opotVerifySID is the verifier's End.DT6 SID (CaseDT6's).
var opotVerifySID = SID(0x206)

// opotVerifyParams are the DUT's verifier parameters (see above).
func opotVerifyParams() (opot.NodeParams, error) {
	p, err := opotProfile(3)
	if err != nil {
		return opot.NodeParams{}, err
	}
	n, err := p.Node(2)
	if err != nil {
		return opot.NodeParams{}, fmt.Errorf("make bench opot verifier: %w", err)
	}
	n.LPC = 1
	n.Dec.R &= 1<<24 - 1
	return n, nil
}

// opotVerifyFrameSpec is the verifier case's frame: one SID, the TLV with
// a valid CML, RND's counter bytes 0 (the generator fills them).
func opotVerifyFrameSpec() FrameSpec {
	spec := FrameSpec{Encap: []netip.Addr{opotVerifySID}}
	n, err := opotVerifyParams()
	if err != nil {
		return spec // TestOPoTScenario fails on the missing TLV
	}
	f := opot.F61
	const low = 0x0abcde // RND bits 23..0 (sequence bits 23..17 and random bits)
	m := opot.Meta{Slot: opotSlot, RND: low ^ n.Dec.R, CML: f.Sub(n.Secret, n.Share) ^ n.Dec.CML}
	spec.TLVs = []srv6.TLV{m.SRv6TLV()}
	return spec
}

// opotCounterOffset is where the generator writes its counter in the
// verifier's frames: byte 1 of RND.
func opotCounterOffset(spec FrameSpec) int {
	off, err := TLVOffset(spec)
	if err != nil {
		return 0
	}
	return off + opot.OffRND + 1
}

// opotCounterFlows is the counter's modulus: large enough never to wrap
// in a run (2^31 packets, over half an hour at 1 Mpps).
const opotCounterFlows = 1 << 31

// The headend: CaseHEncaps' route (segs fc00:6::e), chain key (first
// SID, egress SID) = (fc00:6::e, fc00:6::e).

// opotStages loads bpf/opot.c for a DUT (unloaded with the line).
func opotStages(d *DUT) (*opotdp.Objects, error) {
	return opotStagesWith(d, nil)
}

// opotStagesWith loads bpf/opot.c with the maps of a node pipeline.
func opotStagesWith(d *DUT, pipe map[string]*ebpf.Map) (*opotdp.Objects, error) {
	o, err := opotdp.Load(pipe)
	if err != nil {
		return nil, err
	}
	d.Defer(o.Close)
	return o, nil
}

// opotChain installs node n's chain entry (sid, last) and parameters
// of the bench's chain, and the headend's counter or the verifier's
// window.
func opotChain(o *opotdp.Objects, n opot.NodeParams, sid, last netip.Addr) error {
	return opotdp.PutChain(o, opotID, opotSlot, n, sid, last)
}

// attachTCX attaches prog at tcx ingress or egress of a DUT interface,
// after what is there (detached with the line).
func attachTCX(d *DUT, dev string, prog *ebpf.Program, egress bool) error {
	idx, err := d.Index(dev)
	if err != nil {
		return err
	}
	at := ebpf.AttachTCXIngress
	if egress {
		at = ebpf.AttachTCXEgress
	}
	return d.NS.Do(func() error {
		l, err := link.AttachTCX(link.TCXOptions{Interface: idx, Program: prog, Attach: at})
		if err != nil {
			return fmt.Errorf("attach %s to %s: %w", prog, dev, err)
		}
		d.Defer(l.Close)
		return nil
	})
}

// setupOPoTTransit: srchain's eBPF End doing the transit of node 1 of a
// k-node chain itself (the chain entry marked in-End, as the driver has
// it for an End SID: docs/opot.md "Transit in the End").
func setupOPoTTransit(ctx context.Context, d *DUT, k int) (*opotdp.Objects, error) {
	o, err := opotInEnd(d, k)
	if err != nil {
		return nil, err
	}
	return o, srchainEndWith(ctx, d, false, datapath.EndOptions{OPoT: opotdp.EndMapsOf(o)})
}

// opotInEnd loads the OPoT maps of node 1 of a k-node chain over the
// transit frames' segments, its entry marked in-End.
func opotInEnd(d *DUT, k int) (*opotdp.Objects, error) {
	last := opotTransitSegs[len(opotTransitSegs)-1]
	o, err := opotTransitStages(d, k, nil, opotTransitSegs[0], last)
	if err != nil {
		return nil, err
	}
	return o, opotdp.SetInEnd(o, last)
}

// setupOPoTTransitWith: the transit stage at tcx ingress, then srchain's
// eBPF End (ebpfEnd) or the kernel's End route alone.
func setupOPoTTransitWith(ctx context.Context, d *DUT, k int, ebpfEnd bool) (*opotdp.Objects, error) {
	o, err := opotTransitStages(d, k, nil, opotTransitSegs[0], opotTransitSegs[len(opotTransitSegs)-1])
	if err != nil {
		return nil, err
	}
	if err := attachTCX(d, ifDUTIn, o.SrchainOpotTransit, false); err != nil {
		return nil, err
	}
	if !ebpfEnd {
		return o, CaseEnd.Setup(ctx, d)
	}
	return o, srchainEnd(ctx, d, false)
}

// opotTransitStages loads bpf/opot.c (with the maps of a node pipeline,
// pipe) as node 1 of a k-node chain: the transit of SID sid on chains
// ending with last.
func opotTransitStages(d *DUT, k int, pipe map[string]*ebpf.Map, sid, last netip.Addr) (*opotdp.Objects, error) {
	return opotNodeStages(d, k, 1, pipe, sid, last)
}

// opotNodeStages loads bpf/opot.c as node j of a k-node chain, its entry
// for DA sid on chains ending with last.
func opotNodeStages(d *DUT, k, j int, pipe map[string]*ebpf.Map, sid, last netip.Addr) (*opotdp.Objects, error) {
	p, err := opotProfile(k)
	if err != nil {
		return nil, err
	}
	n, err := p.Node(j)
	if err != nil {
		return nil, fmt.Errorf("set up opot node %d of %d: %w", j, k, err)
	}
	o, err := opotStagesWith(d, pipe)
	if err != nil {
		return nil, err
	}
	return o, opotChain(o, n, sid, last)
}

// setupOPoTTransitXDP: an XDP pipeline (the dispatcher) with srchain's
// End, with opot doing the transit of node 1 of a 3-node chain itself
// (at XDP and at tc), as the driver has it for an End SID.
func setupOPoTTransitXDP(ctx context.Context, d *DUT, withOPoT bool) (*opotdp.Objects, error) {
	var o *opotdp.Objects
	var opts datapath.EndOptions
	if withOPoT {
		var err error
		if o, err = opotInEnd(d, 3); err != nil {
			return nil, err
		}
		opts.OPoT = opotdp.EndMapsOf(o)
	}
	return o, pipelineDUTWith(ctx, d, 0, true, opts, nil)
}

// setupOPoTVerify: the verify stage at tcx ingress in front of the
// kernel's End.DT6.
func setupOPoTVerify(ctx context.Context, d *DUT) (*opotdp.Objects, error) {
	n, err := opotVerifyParams()
	if err != nil {
		return nil, err
	}
	if err := CaseDT6.Setup(ctx, d); err != nil {
		return nil, err
	}
	o, err := opotStages(d)
	if err != nil {
		return nil, err
	}
	if err := opotChain(o, n, opotVerifySID, opotVerifySID); err != nil {
		return nil, err
	}
	return o, attachTCX(d, ifDUTIn, o.SrchainOpotVerify, false)
}

// setupOPoTHeadend: the kernel's H.Encaps route of CaseHEncaps with the
// OPoT chain's reservation in its SRH (as apply installs it,
// opot.Reservation), and the headend stage at tcx egress of the DUT's
// egress, after the encap, filling it.
func setupOPoTHeadend(ctx context.Context, d *DUT) (*opotdp.Objects, error) {
	r := state.Route{
		Dst: netip.MustParsePrefix("fc00:5::/64"), Via: SinkAddr6, Dev: ifDUTOut,
		Encap: &state.SREncap{Mode: state.ModeEncap, Segments: []netip.Addr{ReEncap6}, TLVs: opot.Reservation()},
	}
	nr, err := apply.RouteFor(r, func(name string) (int, error) { return d.Index(name) })
	if err != nil {
		return nil, err
	}
	if err := d.NS.Netlink().RouteReplace(nr); err != nil {
		return nil, fmt.Errorf("add h.encaps route with the opot reservation: %w", err)
	}
	o, err := opotNodeStages(d, 3, 0, nil, ReEncap6, ReEncap6)
	if err != nil {
		return nil, err
	}
	return o, attachTCX(d, ifDUTOut, o.SrchainOpotHeadend, true)
}

// setupOPoTIngress: srchain's eBPF ingress (tc, with xdp also XDP) on
// the DUT's ingress, one chain (the generator's flow, segs fc00:6::e)
// whose TLV it writes as it encapsulates, from the headend's entry and
// parameters in the OPoT maps.
func setupOPoTIngress(ctx context.Context, d *DUT, xdp bool) (*opotdp.Objects, error) {
	o, err := opotNodeStages(d, 3, 0, nil, ReEncap6, ReEncap6)
	if err != nil {
		return nil, err
	}
	chains := ingressChains(1)
	chains[0].Ext = ingress.ExtOPoT
	return o, srchainIngressWith(d, chains, xdp, opotdp.HeadendMapsOf(o))
}

func discardObjs(f func(context.Context, *DUT) (*opotdp.Objects, error)) func(context.Context, *DUT) error {
	return func(ctx context.Context, d *DUT) error {
		_, err := f(ctx, d)
		return err
	}
}

// CaseOPoTTransit is srchain's eBPF End doing the transit, k nodes.
func CaseOPoTTransit(k int) Case {
	name := "opot-transit"
	if k != 3 {
		name = fmt.Sprintf("opot-transit-k%d", k)
	}
	return Case{
		Name: name, Desc: fmt.Sprintf("srchain eBPF End (tc) doing the OPoT transit, chain of %d nodes", k),
		Frame: opotTransitFrame(k),
		Setup: discardObjs(func(ctx context.Context, d *DUT) (*opotdp.Objects, error) { return setupOPoTTransit(ctx, d, k) }),
	}
}

// CaseOPoTVerify is the verify stage + kernel End.DT6, every frame fresh.
var CaseOPoTVerify = Case{
	Name: "opot-verify+dt6", Desc: "OPoT verify stage (tc) + kernel End.DT6",
	Frame: opotVerifyFrameSpec(), Flows: opotCounterFlows, CounterOffset: opotCounterOffset(opotVerifyFrameSpec()),
	Setup: discardObjs(setupOPoTVerify),
}

// CaseDT6Counter is CaseDT6 with the generator's counter on, as the
// verifier case has it, so both pay the same generator work.
var CaseDT6Counter = Case{
	Name: "dt6", Desc: CaseDT6.Desc + " (OPoT-sized frame, per-packet counter)",
	Frame: opotVerifyFrameSpec(), Flows: opotCounterFlows, CounterOffset: opotCounterOffset(opotVerifyFrameSpec()),
	Setup: CaseDT6.Setup,
}

// CaseOPoTHeadend is kernel H.Encaps + the headend stage at tc egress.
var CaseOPoTHeadend = Case{
	Name: "opot-headend", Desc: "kernel H.Encaps (1 SID) + OPoT headend stage (tc egress)",
	Setup: discardObjs(setupOPoTHeadend),
}

// CaseOPoTIngress is srchain's eBPF ingress writing the TLV as it
// encapsulates (tc; with xdp, XDP + tc).
func CaseOPoTIngress(xdp bool) Case {
	name, desc := "opot-ingress-tc", "tc"
	if xdp {
		name, desc = "opot-ingress-xdp", "XDP + tc"
	}
	return Case{
		Name: name, Desc: "srchain eBPF ingress (" + desc + ", 1 SID) writing the OPoT TLV",
		Setup: discardObjs(func(ctx context.Context, d *DUT) (*opotdp.Objects, error) { return setupOPoTIngress(ctx, d, xdp) }),
	}
}

// CaseIngressTC is srchain's eBPF ingress (tc) with the same chain and
// no OPoT: what the TLV costs the eBPF headend.
var CaseIngressTC = Case{
	Name: "ingress-tc", Desc: "srchain eBPF ingress (tc, 1 SID), no OPoT",
	Setup: func(ctx context.Context, d *DUT) error { return srchainIngress(d, 1, false) },
}

// CaseSrchainEndPipeTLV is srchain's End in an XDP pipeline (the
// dispatcher) on the transit frames: the baseline of the XDP transit.
var CaseSrchainEndPipeTLV = Case{
	Name: "pipe-end-xdp", Desc: "XDP pipeline: srchain End, same frames (OPoT TLV, no stage)",
	Frame: opotTransitFrame(3), XDP: true,
	Setup: discardObjs(func(ctx context.Context, d *DUT) (*opotdp.Objects, error) { return setupOPoTTransitXDP(ctx, d, false) }),
}

// CaseOPoTTransitXDP is srchain's End in an XDP pipeline doing the
// transit itself.
var CaseOPoTTransitXDP = Case{
	Name: "opot-transit-xdp", Desc: "XDP pipeline: srchain End doing the OPoT transit, chain of 3 nodes",
	Frame: opotTransitFrame(3), XDP: true,
	Setup: discardObjs(func(ctx context.Context, d *DUT) (*opotdp.Objects, error) { return setupOPoTTransitXDP(ctx, d, true) }),
}

// CaseSrchainEndTLV is srchain's eBPF End on the transit frames (with the
// TLV, which the End walks and leaves alone): the transit's baseline.
var CaseSrchainEndTLV = Case{
	Name: "srchain-end", Desc: "srchain eBPF End (tc), same frames (OPoT TLV, no stage)",
	Frame: opotTransitFrame(3),
	Setup: CaseSrchainEnd.Setup,
}

// CaseEndTLV is the kernel's End on the transit frames: the baseline of
// the transit stage in front of the kernel's End.
var CaseEndTLV = Case{
	Name: "end", Desc: "kernel seg6local End, same frames (OPoT TLV, no stage)",
	Frame: opotTransitFrame(3),
	Setup: CaseEnd.Setup,
}

// CaseOPoTStageEBPFEnd is the transit stage in front of srchain's eBPF
// End: what a transit cost before the End did it (reported, no goal).
var CaseOPoTStageEBPFEnd = Case{
	Name: "opot-stage+srchain-end", Desc: "OPoT transit stage (tc) + srchain eBPF End (tc), chain of 3 nodes",
	Frame: opotTransitFrame(3),
	Setup: discardObjs(func(ctx context.Context, d *DUT) (*opotdp.Objects, error) {
		return setupOPoTTransitWith(ctx, d, 3, true)
	}),
}

// CaseOPoTTransitKernelEnd is the transit stage in front of the kernel's
// End (an NF node without srchain's End).
var CaseOPoTTransitKernelEnd = Case{
	Name: "opot-transit+end", Desc: "OPoT transit stage (tc) + kernel seg6local End, chain of 3 nodes",
	Frame: opotTransitFrame(3),
	Setup: discardObjs(func(ctx context.Context, d *DUT) (*opotdp.Objects, error) {
		return setupOPoTTransitWith(ctx, d, 3, false)
	}),
}

// opotGoals are issue 11's goals: case -> (its baseline, minimum ratio).
var opotGoals = []Goal{
	{"opot-transit", "srchain-end", 0.95},
	{"opot-transit-k5", "srchain-end", 0.95},
	{"opot-transit-k7", "srchain-end", 0.95},
	{"opot-transit+end", "end", 0.95},
	{"opot-transit-xdp", "pipe-end-xdp", 0.95},
	{"opot-transit-csid", "srchain-end-csid", 0.95},
	{"opot-verify+dt6", "dt6", 0.9},
	{"opot-headend", "h.encaps", 0.9},
	{"opot-ingress-tc", "h.encaps", 0.9},
	{"opot-ingress-xdp", "h.encaps", 0.9},
}

func init() {
	Register(&Scenario{
		Name: "opot", Baseline: "srchain-end",
		Desc: "ordered proof of transit: eBPF End doing the transit vs eBPF End (k = 3, 5, 7; on a NEXT-C-SID shift; and the transit stage in front of it), verify + End.DT6 vs End.DT6, headend + H.Encaps and the eBPF ingress writing the TLV (tc, XDP) vs H.Encaps",
		Cases: []Case{
			CaseSrchainEndTLV, CaseOPoTTransit(3), CaseOPoTTransit(5), CaseOPoTTransit(7), CaseOPoTStageEBPFEnd,
			CaseEndTLV, CaseOPoTTransitKernelEnd, CaseSrchainEndPipeTLV, CaseOPoTTransitXDP,
			CaseSrchainEndCSID, CaseOPoTTransitCSID,
			CaseDT6Counter, CaseOPoTVerify,
			CaseHEncaps, CaseOPoTHeadend, CaseIngressTC, CaseOPoTIngress(false), CaseOPoTIngress(true),
		},
		Goals: opotGoals,
	})
}

// NEXT-C-SID (seed 003's OPoT^cSID, section V: 8.3% against 7.0%
// without C-SIDs). The DUT is the first NF of a chain whose SIDs share
// one container: the frames' DA is the container (block fc00:d::/32,
// 16-bit C-SIDs 0x100 then 0x200), the SRH holds it as its only segment
// (SL 0) and the TLV, as compile.CSIDArrivals has it for the chain's
// first member. The End shifts the DA to fc00:d:200:: (RFC 9800 4.1.1),
// routed to the sink, and leaves the SRH alone: it describes no SRH, so
// the transit parses it itself (lib/opot_dp.h opot_in_end).
var (
	opotCSIDContainer = netip.MustParseAddr("fc00:d:100:200::")
	opotCSIDPrefix    = netip.MustParsePrefix("fc00:d:100::/48")
)

// opotCSIDFrame is the C-SID cases' frame: the container and the TLV of
// node 1 of a 3-node chain.
func opotCSIDFrame() FrameSpec {
	spec := FrameSpec{Encap: []netip.Addr{opotCSIDContainer}}
	_, m, err := opotTransitMeta(3)
	if err != nil {
		return spec // TestOPoTScenario fails on the missing TLV
	}
	spec.TLVs = []srv6.TLV{m.SRv6TLV()}
	return spec
}

// srchainEndCSID is srchainEndWith for the C-SID frames: the End SID
// fc00:d:100::/48 with the NEXT-C-SID flavor (block 32, C-SID 16 bits),
// the kernel's End with the same flavor as its slow path, and the route
// of the shifted destination to the sink.
func srchainEndCSID(ctx context.Context, d *DUT, opts datapath.EndOptions) error {
	if err := d.IPs(ctx,
		"-6 route add "+opotCSIDPrefix.String()+" encap seg6local action End flavors next-csid lblen 32 nflen 16 dev "+ifDUTIn,
		"-6 route add fc00:d:200::/48 via "+SinkAddr6.String()+" dev "+ifDUTOut,
	); err != nil {
		return err
	}
	return attachEnd(d, false, opts, func(e *datapath.End) error {
		if err := e.SetSIDPrefix(opotCSIDPrefix, datapath.BehaviorEnd, 0, netip.Addr{}); err != nil {
			return err
		}
		return e.SetNextCSID(opotCSIDPrefix.Addr(), 32, 16)
	})
}

// CaseSrchainEndCSID is srchain's eBPF End shifting the C-SID frames'
// container (TLV carried, no OPoT): the C-SID transit's baseline.
var CaseSrchainEndCSID = Case{
	Name: "srchain-end-csid", Desc: "srchain eBPF End (tc), NEXT-C-SID shift, same frames (OPoT TLV, no stage)",
	Frame: opotCSIDFrame(),
	Setup: func(ctx context.Context, d *DUT) error { return srchainEndCSID(ctx, d, datapath.EndOptions{}) },
}

// CaseOPoTTransitCSID is srchain's eBPF End doing the transit as it
// shifts the container.
var CaseOPoTTransitCSID = Case{
	Name: "opot-transit-csid", Desc: "srchain eBPF End (tc) doing the OPoT transit on a NEXT-C-SID shift, chain of 3 nodes",
	Frame: opotCSIDFrame(),
	Setup: discardObjs(setupOPoTTransitCSID),
}

// setupOPoTTransitCSID: node 1 of a 3-node chain, its entry (DA the
// container, segment 0 the container) marked in-End, and srchain's End
// with the flavor doing the transit.
func setupOPoTTransitCSID(ctx context.Context, d *DUT) (*opotdp.Objects, error) {
	o, err := opotTransitStages(d, 3, nil, opotCSIDContainer, opotCSIDContainer)
	if err != nil {
		return nil, err
	}
	if err := opotdp.SetInEnd(o, opotCSIDContainer); err != nil {
		return nil, err
	}
	return o, srchainEndCSID(ctx, d, datapath.EndOptions{OPoT: opotdp.EndMapsOf(o)})
}
