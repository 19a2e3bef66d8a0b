package bench

import (
	"context"
	"fmt"
	"strings"

	"github.com/srchain/srchain/internal/firewall"
)

// The SERA firewall (seed 000, issue 3) against the kernel's rule-list
// firewalls with the same rules, N = 1..10000: seed 000 Exp. 4/5 shape
// (N-1 rules that do not match, SRH tag 1..N-1 while the frames carry
// tag 0, then the accepting rule), on the frames of CaseEnd. The DUT
// does kernel End on the SID in every case, so the ratio to "end" is the
// cost of the firewall alone. srchain's classifier is a bit-vector search
// (internal/firewall): its cost must not grow with N (issue 3: within
// 10% of N = 1 at N = 10000).

// firewallRuleCounts are the N of the scenario.
var firewallRuleCounts = []int{1, 64, 512, 4096, 10000}

// fwRulesText is the rule list: N-1 tag rules, then the accepting rule.
func fwRulesText(n int) string {
	var b strings.Builder
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, "-m srh --srh-tag %d -j DROP\n", i)
	}
	b.WriteString("-m srh --srh-next-hdr 41 -j ACCEPT\n")
	return b.String()
}

// setupFirewall does kernel End on the DUT (CaseEnd) and puts srchain's
// firewall with the given rules on the DUT's ingress veth (tcx ingress).
func setupFirewall(ctx context.Context, d *DUT, rulesText string, cfg firewall.Config) error {
	if err := CaseEnd.Setup(ctx, d); err != nil {
		return err
	}
	rules, err := firewall.Parse(rulesText)
	if err != nil {
		return err
	}
	cfg.Rules = rules
	fw, err := firewall.Load(cfg)
	if err != nil {
		return err
	}
	d.Defer(fw.Close)
	in, err := d.Index(ifDUTIn)
	if err != nil {
		return err
	}
	return d.NS.Do(func() error { return fw.Attach(in) })
}

// CaseSrchainFirewall is kernel End behind srchain's firewall (tc, tcx
// ingress of the DUT's ingress veth, advanced mode) with n rules.
func CaseSrchainFirewall(n int) Case {
	return Case{
		Name: fmt.Sprintf("srchain-fw-%d", n), Desc: fmt.Sprintf("End + srchain SERA firewall (eBPF, bit-vector), %d rules", n),
		Frame: CaseEnd.Frame, X: float64(n), Series: "srchain firewall",
		Setup: func(ctx context.Context, d *DUT) error {
			return setupFirewall(ctx, d, fwRulesText(n), firewall.Config{Mode: firewall.Advanced})
		},
	}
}

// CaseSrchainFirewallAddr is seed 000 Exp. 2 (basic mode on encap
// packets): N-1 rules on other inner source/destination pairs, then the
// rule matching the frames' inner addresses; LPM lookups instead of the
// tag array.
func CaseSrchainFirewallAddr(n int) Case {
	return Case{
		Name: fmt.Sprintf("srchain-fw-addr-%d", n), Desc: fmt.Sprintf("End + srchain SERA firewall, basic mode, inner -s/-d rules, %d rules", n),
		Frame: CaseEnd.Frame, X: float64(n), Series: "srchain firewall (inner -s/-d)",
		Setup: func(ctx context.Context, d *DUT) error {
			var b strings.Builder
			for i := 1; i < n; i++ {
				fmt.Fprintf(&b, "-s fc00:99::%x -d fc00:98::%x -j DROP\n", i, i)
			}
			fmt.Fprintf(&b, "-s %s/64 -d %s/64 -j ACCEPT\n", InnerSrc6, InnerDst6)
			return setupFirewall(ctx, d, b.String(), firewall.Config{Mode: firewall.Basic, Policy: firewall.Drop})
		},
	}
}

// CaseSrchainFirewallWorst is the bit-vector search's worst case: every
// even rule matches the frames' inner source but not their destination,
// every odd rule the destination but not the source, so every bitmap
// word is a candidate whose AND is empty until the last, matching rule:
// the program visits all N/64 words.
func CaseSrchainFirewallWorst(n int) Case {
	return Case{
		Name: fmt.Sprintf("srchain-fw-worst-%d", n), Desc: fmt.Sprintf("End + srchain SERA firewall, worst case for the bit vectors, %d rules", n),
		Frame: CaseEnd.Frame, X: float64(n), Series: "srchain firewall (worst case)",
		Setup: func(ctx context.Context, d *DUT) error {
			var b strings.Builder
			for i := 1; i < n; i++ {
				if i%2 == 0 {
					fmt.Fprintf(&b, "-s %s/64 -d fc00:98::/64 -j DROP\n", InnerSrc6)
				} else {
					fmt.Fprintf(&b, "-s fc00:97::/64 -d %s/64 -j DROP\n", InnerDst6)
				}
			}
			fmt.Fprintf(&b, "-s %s/64 -d %s/64 -j ACCEPT\n", InnerSrc6, InnerDst6)
			return setupFirewall(ctx, d, b.String(), firewall.Config{Mode: firewall.Basic, Policy: firewall.Drop})
		},
	}
}

// CaseNftSRH is kernel End followed by an nftables forward chain with the
// same rules (nft's srh expression; the last rule accepts).
func CaseNftSRH(n int) Case {
	return Case{
		Name: fmt.Sprintf("nft-srh-%d", n), Desc: fmt.Sprintf("End + nftables forward chain (srh tag), %d rules", n),
		Frame: CaseEnd.Frame, X: float64(n), Series: "nftables srh",
		Setup: func(ctx context.Context, d *DUT) error {
			if err := CaseEnd.Setup(ctx, d); err != nil {
				return err
			}
			var b strings.Builder
			b.WriteString("table inet srcb {\n chain bench {\n  type filter hook forward priority 0; policy accept;\n")
			for i := 1; i < n; i++ {
				fmt.Fprintf(&b, "  srh tag %d drop\n", i)
			}
			b.WriteString("  accept\n }\n}\n")
			return d.Nft(ctx, b.String())
		},
	}
}

func init() {
	cases := []Case{CaseEnd}
	cases = append(cases, ruleCases(CaseSrchainFirewall, firewallRuleCounts...)...)
	cases = append(cases, ruleCases(CaseSrchainFirewallAddr, firewallRuleCounts...)...)
	cases = append(cases, ruleCases(CaseSrchainFirewallWorst, 512, 4096, 10000)...)
	cases = append(cases, ruleCases(CaseIP6tSRH, firewallRuleCounts...)...)
	cases = append(cases, ruleCases(CaseNftSRH, firewallRuleCounts...)...)
	Register(&Scenario{
		Name: "firewall", Baseline: "end", XLabel: "rules",
		Desc:  "seed 000: End + srchain SERA firewall vs ip6tables -m srh and nftables with the same N rules (1..10000)",
		Cases: cases,
	})
}
