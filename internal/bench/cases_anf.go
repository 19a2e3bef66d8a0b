package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"

	"github.com/srchain/srchain/internal/kind"
	"github.com/srchain/srchain/internal/kinds/netfilter"
	"github.com/srchain/srchain/internal/state"
)

// End.AN.NF (seed 002, issue 10) against kernel End and the kernel
// workaround (decapsulate, nftables forward hook, re-encapsulate: the
// decap-reencap cases), same frames, same one-rule forward chain. The
// DUT runs srchain's netfilter NF exactly as a lab node does (its driver:
// ruleset in table inet srchain_anf, restore device, fwmark rule,
// tc programs). Seed 002 chapter 4: within 6% of End, +27% over End.DT4
// + H.Encaps; goals here >= 0.9x End and >= 1.1x the workaround.

// anfRuleset is a forward chain of one accepting rule for the inner
// destination; with ct, conntrack runs on every packet first (seed 002
// evaluates nftables with conntrack-based rules).
func anfRuleset(match string, ct bool) string {
	r := "chain forward {\n  type filter hook forward priority filter; policy accept;\n"
	if ct {
		r += "  ct state established,related accept\n"
	}
	return r + "  " + match + " accept\n}\n"
}

// setupANF serves sid as End.AN.NF on the DUT's ingress veth.
func setupANF(ctx context.Context, d *DUT, sid netip.Addr, ruleset string) error {
	if err := d.IP(ctx, "-6", "route", "add", sid.String()+"/128", "encap", "seg6local", "action", "End", "dev", ifDUTIn); err != nil {
		return err
	}
	// The restore device fits what the links carry (the lab computes the
	// same from the node's links).
	prog := netfilter.Program{SID: netip.PrefixFrom(sid, 128), Ruleset: ruleset, RestoreMTU: linkMTU - netfilter.Overhead(2)}
	cfg, err := json.Marshal(prog)
	if err != nil {
		return err
	}
	p := state.Program{Kind: netfilter.Name, NF: "bench", Interfaces: []string{ifDUTIn}, Config: cfg}
	drv, ok := kind.DriverFor(netfilter.Name)
	if !ok {
		return fmt.Errorf("setup anf: no %s driver", netfilter.Name)
	}
	if _, err := drv.Apply(ctx, d.NS, state.Node{}, p); err != nil {
		return err
	}
	d.Defer(func() error { return drv.Remove(context.Background(), d.NS, state.Node{}, p) })
	return nil
}

// CaseANF is End.AN.NF with a one-rule ruleset (ct: conntrack first),
// inner IPv6 or IPv4.
func CaseANF(inner4, ct bool) Case {
	name, desc, n := "anf6", "srchain End.AN.NF (tc), nftables forward 1 rule, inner IPv6", uint16(0x406)
	match := "ip6 daddr fc00:5::/64"
	if inner4 {
		name, desc, n, match = "anf4", "srchain End.AN.NF (tc), nftables forward 1 rule, inner IPv4", 0x404, "ip daddr 10.5.0.0/16"
	}
	if ct {
		name, desc, n = name+"-ct", desc+", conntrack", n+0x10
	}
	return Case{
		Name: name, Desc: desc,
		Frame: FrameSpec{Encap: sids(n, 0), Inner4: inner4},
		Setup: func(ctx context.Context, d *DUT) error {
			return setupANF(ctx, d, SID(n), anfRuleset(match, ct))
		},
	}
}

// CaseDT6NftCtEncap is the workaround (CaseDT6NftEncap) with conntrack.
var CaseDT6NftCtEncap = Case{
	Name: "dt6+nft-ct+encap", Desc: "End.DT6 -> nftables forward (conntrack + 1 rule) -> H.Encaps",
	Frame: FrameSpec{Encap: sids(0x316)},
	Setup: func(ctx context.Context, d *DUT) error {
		if err := d.IPs(ctx,
			"-6 route add fc00:d::316/128 encap seg6local action End.DT6 table 100 dev "+ifDUTIn,
			"-6 route add fc00:5::/64 encap seg6 mode encap segs "+ReEncap6.String()+" via "+SinkAddr6.String()+" dev "+ifDUTOut+" table 100",
		); err != nil {
			return err
		}
		return d.Nft(ctx, "table inet srcb {\n chain bench {\n  type filter hook forward priority 0; policy accept;\n  ct state established,related accept\n  ip6 daddr fc00:5::/64 accept\n }\n}\n")
	},
}

func init() {
	Register(&Scenario{
		Name: "anf", Baseline: "end",
		Desc: "seed 002 / issue 10: srchain End.AN.NF vs kernel End and the decap + nftables + re-encap workaround (1 rule; with conntrack)",
		Cases: []Case{CasePlain, CaseEnd, CaseANF(false, false), CaseANF(true, false), CaseANF(false, true),
			CaseDT6NftEncap, CaseDX4NftEncap, CaseDT6NftCtEncap},
		// Issue 10: >= 0.9x the kernel End, >= 1.1x the kernel workaround.
		Goals: []Goal{
			{"anf6", "end", 0.9}, {"anf4", "end", 0.9},
			{"anf6", CaseDT6NftEncap.Name, 1.1}, {"anf4", CaseDX4NftEncap.Name, 1.1},
			{"anf6-ct", CaseDT6NftCtEncap.Name, 1.1},
		},
	})
}
