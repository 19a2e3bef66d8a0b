package bench

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	"github.com/cilium/ebpf"

	"github.com/srchain/srchain/internal/ingress"
	"github.com/srchain/srchain/internal/state"
)

// Scenario "ingress" (issue 8 section 5): the cost of steering packets
// into chains at the headend as the number of chains grows. Every case
// H.Encaps the generator's plain UDP flow (fc00:4::1 -> fc00:5::1, port
// 1024 -> 9) with one SID (ReEncap6, routed to the sink):
//   - h.encaps: the kernel's seg6 encap route, 1 chain (the baseline);
//   - k-5tuple-N: N 5-tuple chains as the kernel does them (one ip rule
//     and one table each, as internal/compile emits them): N-1 rules
//     for other UDP ports first, the matching one last, so the packet
//     crosses every rule as it would the last chain of a spec;
//   - ebpf-tc-N, ebpf-xdp-N: the same N chains classified by srchain's
//     eBPF ingress (tc; XDP + tc), no ip rule.

// ingressChains are N 5-tuple chains to fc00:5::/64, UDP port 10000+i
// for i < N-1, the last one port 9 (the generator's).
func ingressChains(n int) []state.IngressChain {
	out := make([]state.IngressChain, n)
	dst := []netip.Prefix{netip.MustParsePrefix("fc00:5::/64")}
	for i := range out {
		port := uint16(10000 + i)
		if i == n-1 {
			port = 9
		}
		out[i] = state.IngressChain{
			Name: fmt.Sprintf("c%d", i), Mode: state.ModeEncap, Segments: []netip.Addr{ReEncap6},
			Dev: ifDUTOut, Dst: dst, Proto: 17, DPort: state.PortRange{From: port, To: port},
		}
	}
	return out
}

// CaseKernel5Tuple is N kernel 5-tuple chains: ip rules (priority 1000+i,
// udp dport) pointing at tables holding the chain's seg6 encap route.
func CaseKernel5Tuple(n int) Case {
	return Case{
		Name: fmt.Sprintf("k-5tuple-%d", n), Desc: fmt.Sprintf("kernel: %d 5-tuple chains (ip rule + table + seg6 encap each)", n),
		X: float64(n), Series: "kernel ip rules",
		Setup: func(ctx context.Context, d *DUT) error {
			var rules, routes strings.Builder
			// Rules in descending priority: the kernel inserts those
			// fastest (docs/benchmarks.md, control plane).
			chains := ingressChains(n)
			for i := n - 1; i >= 0; i-- {
				c := chains[i]
				fmt.Fprintf(&rules, "rule add priority %d to fc00:5::/64 ipproto udp dport %d table %d\n", 1000+i, c.DPort.From, 1000+i)
				fmt.Fprintf(&routes, "route add fc00:5::/64 table %d encap seg6 mode encap segs %s via %s dev %s\n",
					1000+i, ReEncap6, SinkAddr6, ifDUTOut)
			}
			if err := d.stdin(ctx, routes.String(), "ip", "-6", "-batch", "-"); err != nil {
				return err
			}
			return d.stdin(ctx, rules.String(), "ip", "-6", "-batch", "-")
		},
	}
}

// CaseIngressEBPF is the same N chains in srchain's eBPF ingress on the
// DUT's ingress veth (tc; with xdp also the XDP fast path).
func CaseIngressEBPF(n int, xdp bool) Case {
	name, series, desc := "ebpf-tc", "srchain ingress (tc)", "tc"
	if xdp {
		name, series, desc = "ebpf-xdp", "srchain ingress (XDP)", "XDP + tc"
	}
	return Case{
		Name: fmt.Sprintf("%s-%d", name, n), Desc: fmt.Sprintf("srchain eBPF ingress (%s): %d 5-tuple chains", desc, n),
		X: float64(n), Series: series,
		Setup: func(ctx context.Context, d *DUT) error { return srchainIngress(d, n, xdp) },
	}
}

func srchainIngress(d *DUT, n int, xdp bool) error {
	return srchainIngressWith(d, ingressChains(n), xdp, nil)
}

// srchainIngressWith runs srchain's eBPF ingress with chains on the DUT's
// ingress veth; opotMaps are the OPoT maps its headend extension uses
// (ingress.Options.OPoT).
func srchainIngressWith(d *DUT, chains []state.IngressChain, xdp bool, opotMaps map[string]*ebpf.Map) error {
	in, err := d.Index(ifDUTIn)
	if err != nil {
		return err
	}
	// The kernel's policy beside the program, as the compiler emits it
	// for `ingress: ebpf`: the path for what the fast path leaves to the
	// kernel, and what its routing check finds (docs/datapath.md).
	batch := map[string]*strings.Builder{"-4": {}, "-6": {}}
	for _, args := range ingress.KernelPolicy(chains, ifDUTOut) {
		fmt.Fprintln(batch[args[0]], strings.Join(args[1:], " "))
	}
	for _, fam := range []string{"-6", "-4"} {
		if batch[fam].Len() == 0 {
			continue
		}
		if err := d.stdin(context.Background(), batch[fam].String(), "ip", fam, "-batch", "-"); err != nil {
			return err
		}
	}
	cfg := ingress.Config{Chains: chains}
	ing, err := ingress.Load(ingress.Options{XDP: xdp, Capacity: ingress.CapacityFor(len(chains)), OPoT: opotMaps})
	if err != nil {
		return err
	}
	d.Defer(ing.Close)
	s, err := ingress.ReadSettings(d.NS, state.Node{TunSrc: DUTOut6}, cfg)
	if err != nil {
		return err
	}
	if _, err := ing.Update(cfg, s); err != nil {
		return err
	}
	return d.NS.Do(func() error {
		tl, err := ing.Attach(in, "")
		if err != nil {
			return err
		}
		d.Defer(tl.Close)
		if xdp {
			xl, err := ing.AttachXDP(in, "")
			if err != nil {
				return err
			}
			d.Defer(xl.Close)
		}
		return nil
	})
}

// IngressChainCounts are the chain counts the scenario measures.
var IngressChainCounts = []int{1, 64, 512, 10000}

func init() {
	cases := []Case{CaseHEncaps}
	for _, mk := range []func(int) Case{
		CaseKernel5Tuple,
		func(n int) Case { return CaseIngressEBPF(n, false) },
		func(n int) Case { return CaseIngressEBPF(n, true) },
	} {
		cases = append(cases, ruleCases(mk, IngressChainCounts...)...)
	}
	Register(&Scenario{
		Name: "ingress", Baseline: "h.encaps", XLabel: "chains",
		Desc:  "headend: kernel seg6 encap (1 chain), kernel 5-tuple chains (ip rules), srchain eBPF ingress tc and XDP, 1/64/512/10,000 chains",
		Cases: cases,
	})
}
