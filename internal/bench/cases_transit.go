package bench

import (
	"context"
	"fmt"
	"strings"
)

// Scenario "transit" (issue 12, seed 004 section 4.1 and Fig. 5): what
// per-chain state costs a transit node. With source routing (SRv6) a
// transit node keeps no state per chain: the kernel's End looks up its SID
// and the next segment whatever the number of chains. With rule-based
// chaining every hop holds one forwarding entry per chain; seed 004
// forwards by destination with 380,000 routes and finds source routing
// over 30% faster. Cases:
//   - end: kernel End, one flow (the baseline);
//   - plain: plain IPv6 forwarding with no per-chain route (fc00:5::/64);
//   - end-flows-100k: kernel End, the inner source varied over 100,000
//     flows (chains differ inside the packet, not in the node);
//   - srchain-end-xdp: srchain's End at XDP, one flow;
//   - route-N: plain IPv6 forwarding with N per-chain /128 routes
//     (fc00:5::1 .. fc00:5::N, each via the sink), the generator's
//     destination varied over all N per packet, so every lookup lands on
//     a different chain's entry. Rule-based chaining with ip rules
//     instead of routes cannot reach these counts: the kernel inserts
//     10,000 IPv6 rules in about 26 s (docs/benchmarks.md, control plane).

// TransitChainCounts are the per-chain route counts measured (380,000 is
// seed 004's table).
var TransitChainCounts = []int{1000, 10000, 100000, 380000}

// transitDstOffset is the offset of the low 32 bits of the destination
// address of a plain frame: the generator writes 1 + (run mod N) there.
func transitDstOffset() int {
	off, err := FlowOffset(CasePlain.Frame) // low 32 bits of the source
	if err != nil {
		panic(err) // CasePlain.Frame is a constant IPv6 frame
	}
	return off + 16
}

// CaseRoutes forwards plain frames by destination with n per-chain
// routes in the DUT's main table.
func CaseRoutes(n int) Case {
	return Case{
		Name: fmt.Sprintf("route-%s", countName(n)), Desc: fmt.Sprintf("rule-based: plain IPv6 forwarding, %d per-chain /128 routes, destination varied over all", n),
		Frame: CasePlain.Frame, X: float64(n), Series: "per-chain routes",
		Flows: n, CounterOffset: transitDstOffset(),
		Setup: func(ctx context.Context, d *DUT) error {
			var b strings.Builder
			b.Grow(n * 64)
			for i := 1; i <= n; i++ {
				// fc00:5:: with the low 32 bits = i, as the generator writes them.
				fmt.Fprintf(&b, "route add fc00:5::%x:%x/128 via %s dev %s\n", i>>16, i&0xffff, SinkAddr6, ifDUTOut)
			}
			return d.stdin(ctx, b.String(), "ip", "-6", "-batch", "-")
		},
	}
}

// countName writes 1000 as 1k, 380000 as 380k.
func countName(n int) string {
	if n >= 1000 && n%1000 == 0 {
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

func init() {
	cases := []Case{
		CaseEnd, CasePlain,
		{Name: "end-flows-100k", Desc: "kernel End, inner source varied over 100,000 flows", Frame: CaseEnd.Frame, Flows: 100000, Setup: CaseEnd.Setup},
		CaseSrchainEndXDP,
	}
	cases = append(cases, ruleCases(CaseRoutes, TransitChainCounts...)...)
	Register(&Scenario{
		Name: "transit", Baseline: CaseEnd.Name, XLabel: "per-chain routes",
		Desc:  "transit node: source routing (End, no per-chain state) vs rule-based forwarding with 1k..380k per-chain routes (seed 004 Fig. 5)",
		Cases: cases,
	})
}
