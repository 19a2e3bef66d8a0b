package bench

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/srchain/srchain/internal/datapath"
	"github.com/srchain/srchain/internal/firewall"
	"github.com/srchain/srchain/internal/pipeline"
)

// The per-node pipeline (issue 13, docs/pipeline.md): the firewall and
// the End composed at XDP by the dispatcher, against the kernel's End, the
// same pair at tc, and the XDP ceiling (a bare XDP redirect).

// CaseXDPFwd is the ceiling: plain IPv6 forwarding in XDP (FIB lookup,
// hop limit, MACs, redirect) on the plain frames.
var CaseXDPFwd = Case{
	Name: "xdp-fwd", Desc: "bare XDP redirect (FIB lookup, no SRv6): the XDP ceiling",
	Frame: CasePlain.Frame, XDP: true,
	Setup: func(ctx context.Context, d *DUT) error {
		var objs xdpfwdObjects
		if err := loadXdpfwdObjects(&objs, nil); err != nil {
			return fmt.Errorf("load xdpfwd: %w", err)
		}
		d.Defer(objs.Close)
		return attachXDP(d, objs.Xdpfwd)
	},
}

func attachXDP(d *DUT, prog *ebpf.Program) error {
	in, err := d.Index(ifDUTIn)
	if err != nil {
		return err
	}
	return d.NS.Do(func() error {
		l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: in})
		if err != nil {
			return fmt.Errorf("attach xdp: %w", err)
		}
		d.Defer(l.Close)
		return nil
	})
}

// pipelineDUT sets up the kernel End route (the End's slow path), an
// eBPF End at tc, optionally a firewall of n rules at tc in front of it,
// and with xdp both as stages of an XDP pipeline behind the dispatcher.
func pipelineDUT(ctx context.Context, d *DUT, rules int, xdp bool) error {
	return pipelineDUTWith(ctx, d, rules, xdp, datapath.EndOptions{}, nil)
}

// pipelineDUTWith is pipelineDUT with the End loaded with endOpts (its
// Pipeline set here) and more XDP stages: more, given the pipeline's
// maps, loads their programs (with those maps) and adds them.
func pipelineDUTWith(ctx context.Context, d *DUT, rules int, xdp bool, endOpts datapath.EndOptions,
	more func(m *pipeline.Maps, stages map[pipeline.Stage]*ebpf.Program) error) error {
	if err := CaseEnd.Setup(ctx, d); err != nil {
		return err
	}
	in, err := d.Index(ifDUTIn)
	if err != nil {
		return err
	}
	m, err := pipeline.OpenMaps("")
	if err != nil {
		return err
	}
	d.Defer(m.Close)
	stages := map[pipeline.Stage]*ebpf.Program{}
	if rules > 0 {
		fr, err := firewall.Parse(fwRulesText(rules))
		if err != nil {
			return err
		}
		fw, err := firewall.LoadCapacity(firewall.Config{Mode: firewall.Advanced, Rules: fr},
			firewall.Capacity{XDP: xdp, Pipeline: m.Replacements()})
		if err != nil {
			return err
		}
		d.Defer(fw.Close)
		if err := d.NS.Do(func() error { return fw.Attach(in) }); err != nil {
			return err
		}
		if xdp {
			stages[pipeline.Firewall] = fw.XDPProgram()
		}
	}
	endOpts.Pipeline = m.Replacements()
	e, err := datapath.LoadEnd(endOpts)
	if err != nil {
		return err
	}
	d.Defer(e.Close)
	if err := e.SetSID(SID(0x100), datapath.BehaviorEnd, 0, netip.Addr{}); err != nil {
		return err
	}
	if err := d.NS.Do(func() error {
		if err := e.Attach(in); err != nil {
			return err
		}
		return e.ServeXDP(in)
	}); err != nil {
		return err
	}
	if !xdp {
		return nil
	}
	stages[pipeline.End] = e.XDPProgram()
	if more != nil {
		if err := more(m, stages); err != nil {
			return err
		}
	}
	if err := m.Set(stages); err != nil {
		return err
	}
	disp, err := pipeline.LoadDispatcher(m)
	if err != nil {
		return err
	}
	d.Defer(disp.Close)
	return attachXDP(d, disp)
}

var pipelineRules = 10000

func init() {
	Register(&Scenario{
		Name: "pipeline", Baseline: "end", Ceiling: CaseXDPFwd.Name,
		Desc: "per-node pipeline: SERA firewall (10,000 rules) + eBPF End at tc and at XDP vs kernel End, XDP cases against a bare XDP redirect",
		Cases: []Case{
			CasePlain, CaseEnd, CaseXDPFwd, CaseSrchainEndXDP,
			{Name: "pipe-end-xdp", Desc: "XDP pipeline: End", Frame: CaseEnd.Frame, XDP: true,
				Setup: func(ctx context.Context, d *DUT) error { return pipelineDUT(ctx, d, 0, true) }},
			{Name: fmt.Sprintf("fw-%d+end-tc", pipelineRules), Desc: "tc: SERA firewall then eBPF End (tcx)", Frame: CaseEnd.Frame,
				Setup: func(ctx context.Context, d *DUT) error { return pipelineDUT(ctx, d, pipelineRules, false) }},
			{Name: "pipe-fw-1+end-xdp", Desc: "XDP pipeline: SERA firewall (1 rule) -> End", Frame: CaseEnd.Frame, XDP: true,
				Setup: func(ctx context.Context, d *DUT) error { return pipelineDUT(ctx, d, 1, true) }},
			{Name: fmt.Sprintf("pipe-fw-%d+end-xdp", pipelineRules), Desc: "XDP pipeline: SERA firewall -> End", Frame: CaseEnd.Frame, XDP: true,
				Setup: func(ctx context.Context, d *DUT) error { return pipelineDUT(ctx, d, pipelineRules, true) }},
		},
		// Issue 13: firewall (10,000 rules) + End >= 0.9x the kernel End
		// at tc, >= 2x at XDP.
		Goals: []Goal{
			{fmt.Sprintf("fw-%d+end-tc", pipelineRules), CaseEnd.Name, 0.9},
			{fmt.Sprintf("pipe-fw-%d+end-xdp", pipelineRules), CaseEnd.Name, 2},
		},
	})
}
