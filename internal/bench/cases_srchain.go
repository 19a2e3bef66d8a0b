package bench

import (
	"context"
	"net/netip"

	"github.com/srchain/srchain/internal/datapath"
)

// srchain's own data plane, measured against the kernel behaviors it
// stands beside (DESIGN.md C3, C10).

// CaseSrchainEnd is srchain's eBPF End (tc, tcx ingress of the DUT's
// ingress veth) on the same frames as CaseEnd.
var CaseSrchainEnd = Case{
	Name: "srchain-end", Desc: "srchain eBPF End (tc)",
	Frame: CaseEnd.Frame,
	Setup: func(ctx context.Context, d *DUT) error { return srchainEnd(ctx, d, false) },
}

// CaseSrchainEndXDP adds the XDP twin of the End program (C10 fast path).
var CaseSrchainEndXDP = Case{
	Name: "srchain-end-xdp", Desc: "srchain eBPF End (XDP + tc)",
	Frame: CaseEnd.Frame, XDP: true,
	Setup: func(ctx context.Context, d *DUT) error { return srchainEnd(ctx, d, true) },
}

func srchainEnd(ctx context.Context, d *DUT, xdp bool) error {
	return srchainEndWith(ctx, d, xdp, datapath.EndOptions{})
}

// srchainEndWith is srchainEnd with the End loaded with opts.
func srchainEndWith(ctx context.Context, d *DUT, xdp bool, opts datapath.EndOptions) error {
	// The kernel's End route is the slow path for every packet the
	// program hands over (issue 8); the fast path is what is measured.
	if err := CaseEnd.Setup(ctx, d); err != nil {
		return err
	}
	return attachEnd(d, xdp, opts, func(e *datapath.End) error {
		return e.SetSID(SID(0x100), datapath.BehaviorEnd, 0, netip.Addr{})
	})
}

// attachEnd loads srchain's End with opts (closed with the line), gives
// it its SIDs (set), and attaches it at the DUT's ingress: tc, with xdp
// also XDP.
func attachEnd(d *DUT, xdp bool, opts datapath.EndOptions, set func(*datapath.End) error) error {
	in, err := d.Index(ifDUTIn)
	if err != nil {
		return err
	}
	e, err := datapath.LoadEnd(opts)
	if err != nil {
		return err
	}
	d.Defer(e.Close)
	if err := set(e); err != nil {
		return err
	}
	return d.NS.Do(func() error {
		if err := e.Attach(in); err != nil {
			return err
		}
		if xdp {
			return e.AttachXDP(in)
		}
		return nil
	})
}

func init() {
	Register(&Scenario{
		Name: "srchain-end", Baseline: "end",
		Desc:  "srchain eBPF End (tc and XDP) vs kernel End",
		Cases: []Case{CasePlain, CaseEnd, CaseSrchainEnd, CaseSrchainEndXDP},
	})
}
