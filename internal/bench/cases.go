package bench

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
)

// The built-in cases: the kernel baselines every srchain number is a ratio
// to (DESIGN.md "Performance"). SIDs are fc00:d::<behavior-ish number>.

// CasePlain: plain IPv6 forwarding, the baseline of baselines.
var CasePlain = Case{Name: "plain", Desc: "IPv6 forwarding (no SRv6)"}

// CaseEnd: kernel seg6local End (RFC 8986 section 4.1), SL 1 -> 0.
var CaseEnd = Case{
	Name: "end", Desc: "kernel seg6local End",
	Frame: FrameSpec{Encap: sids(0x100, 0)},
	Setup: ipSetup("-6 route add fc00:d::100/128 encap seg6local action End dev " + ifDUTIn),
}

// CaseDX6: kernel End.DX6 (RFC 8986 section 4.5) towards the sink.
var CaseDX6 = Case{
	Name: "dx6", Desc: "kernel End.DX6 (decap, cross-connect)",
	Frame: FrameSpec{Encap: sids(0x106)},
	Setup: ipSetup("-6 route add fc00:d::106/128 encap seg6local action End.DX6 nh6 " + SinkAddr6.String() + " dev " + ifDUTIn),
}

// CaseDT6: kernel End.DT6 (RFC 8986 section 4.6) in the main table
// (legacy `table`, VRF is absent).
var CaseDT6 = Case{
	Name: "dt6", Desc: "kernel End.DT6 (decap, table lookup)",
	Frame: FrameSpec{Encap: sids(0x206)},
	Setup: ipSetup("-6 route add fc00:d::206/128 encap seg6local action End.DT6 table 254 dev " + ifDUTIn),
}

// CaseHEncaps: kernel seg6 encap (H.Encaps, RFC 8986 section 5.1).
var CaseHEncaps = Case{
	Name: "h.encaps", Desc: "kernel seg6 H.Encaps (1 SID)",
	Setup: ipSetup("-6 route replace fc00:5::/64 encap seg6 mode encap segs " + ReEncap6.String() +
		" via " + SinkAddr6.String() + " dev " + ifDUTOut),
}

// CaseHInsert: kernel seg6 inline (H.Insert).
var CaseHInsert = Case{
	Name: "h.insert", Desc: "kernel seg6 H.Insert (1 SID)",
	Setup: ipSetup("-6 route replace fc00:5::/64 encap seg6 mode inline segs " + ReEncap6.String() +
		" via " + SinkAddr6.String() + " dev " + ifDUTOut),
}

// CaseDT6NftEncap: seed 002's workaround for netfilter on the inner
// packet: decapsulate (End.DT6 into table 100), filter in the forward
// hook, re-encapsulate (H.Encaps route in table 100).
var CaseDT6NftEncap = Case{
	Name: "dt6+nft+encap", Desc: "End.DT6 -> nftables forward (1 rule) -> H.Encaps",
	Frame: FrameSpec{Encap: sids(0x306)},
	Setup: func(ctx context.Context, d *DUT) error {
		if err := d.IPs(ctx,
			"-6 route add fc00:d::306/128 encap seg6local action End.DT6 table 100 dev "+ifDUTIn,
			"-6 route add fc00:5::/64 encap seg6 mode encap segs "+ReEncap6.String()+" via "+SinkAddr6.String()+" dev "+ifDUTOut+" table 100",
		); err != nil {
			return err
		}
		return d.Nft(ctx, nftForward(1, "ip6 daddr fc00:5::/64 accept"))
	},
}

// CaseDX4NftEncap: the IPv4 variant with End.DX4 (End.DT4 needs VRF,
// which this kernel lacks): decapsulate, forward hook, re-encapsulate.
var CaseDX4NftEncap = Case{
	Name: "dx4+nft+encap", Desc: "End.DX4 -> nftables forward (1 rule) -> H.Encaps (inner IPv4)",
	Frame: FrameSpec{Encap: sids(0x104), Inner4: true},
	Setup: func(ctx context.Context, d *DUT) error {
		if err := d.IPs(ctx,
			"-4 route replace 10.5.0.0/16 encap seg6 mode encap segs "+ReEncap6.String()+" via "+SinkAddr4.String()+" dev "+ifDUTOut,
			"-6 route add fc00:d::104/128 encap seg6local action End.DX4 nh4 "+InnerDst4.String()+" dev "+ifDUTIn,
		); err != nil {
			return err
		}
		return d.Nft(ctx, nftForward(1, "ip daddr 10.5.0.0/16 accept"))
	},
}

// CaseNft is plain forwarding through an nftables forward chain of n
// rules: n-1 that do not match, then the accepting one (seed 000 Exp. 1
// shape: the matching rule last, so every rule is evaluated).
func CaseNft(n int) Case {
	return Case{
		Name: fmt.Sprintf("nft-%d", n), Desc: fmt.Sprintf("IPv6 forwarding, nftables forward chain, %d rules", n),
		X: float64(n), Series: "nft forward",
		Setup: func(ctx context.Context, d *DUT) error {
			return d.Nft(ctx, nftForward(n, "ip6 daddr fc00:5::/64 accept"))
		},
	}
}

// CaseIP6tSRH is kernel End followed by an ip6tables forward chain of n
// `-m srh` rules: n-1 that do not match (SRH tag 1..n-1; ours is 0),
// then one that accepts (seed 000 Exp. 4/5, the legacy SR-aware firewall).
func CaseIP6tSRH(n int) Case {
	return Case{
		Name: fmt.Sprintf("ip6t-srh-%d", n), Desc: fmt.Sprintf("End + ip6tables -m srh forward chain, %d rules", n),
		Frame: CaseEnd.Frame, X: float64(n), Series: "ip6tables -m srh",
		Setup: func(ctx context.Context, d *DUT) error {
			if err := CaseEnd.Setup(ctx, d); err != nil {
				return err
			}
			var b strings.Builder
			b.WriteString("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n")
			for i := 1; i < n; i++ {
				fmt.Fprintf(&b, "-A FORWARD -m srh --srh-tag %d -j DROP\n", i)
			}
			b.WriteString("-A FORWARD -m srh --srh-next-hdr 41 -j ACCEPT\nCOMMIT\n")
			return d.IP6TablesRestore(ctx, b.String())
		},
	}
}

// nftForward is a forward base chain with n-1 non-matching rules (each a
// different unused destination) and then last.
func nftForward(n int, last string) string {
	var b strings.Builder
	b.WriteString("table inet srcb {\n chain bench {\n  type filter hook forward priority 0; policy accept;\n")
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, "  ip6 daddr fc00:99::%x drop\n", i)
	}
	b.WriteString("  " + last + "\n }\n}\n")
	return b.String()
}

// sids is fc00:d::<n> for each n, except 0 which means the inner
// destination (the last segment after the DUT's End).
func sids(ns ...uint16) []netip.Addr {
	out := make([]netip.Addr, len(ns))
	for i, n := range ns {
		if n == 0 {
			out[i] = InnerDst6
		} else {
			out[i] = SID(n)
		}
	}
	return out
}

func ipSetup(cmds ...string) func(context.Context, *DUT) error {
	return func(ctx context.Context, d *DUT) error { return d.IPs(ctx, cmds...) }
}

func ruleCases(mk func(int) Case, ns ...int) []Case {
	out := make([]Case, len(ns))
	for i, n := range ns {
		out[i] = mk(n)
	}
	return out
}

func init() {
	Register(&Scenario{
		Name: "baseline", Baseline: "plain", XLabel: "rules",
		Desc: "kernel baselines: forwarding, End, DX6, DT6, H.Encaps, H.Insert, nftables and ip6tables -m srh with 1/64/512 rules; srchain eBPF End",
		Cases: append(append(append([]Case{CasePlain, CaseEnd, CaseDX6, CaseDT6, CaseHEncaps, CaseHInsert},
			ruleCases(CaseNft, 1, 64, 512)...), ruleCases(CaseIP6tSRH, 1, 64, 512)...),
			CaseSrchainEnd, CaseSrchainEndXDP),
		// Issue 8: srchain's End >= 1.15x the kernel's at tc, >= 2x at XDP.
		Goals: []Goal{{CaseSrchainEnd.Name, CaseEnd.Name, 1.15}, {CaseSrchainEndXDP.Name, CaseEnd.Name, 2}},
	})
	Register(&Scenario{
		Name: "decap-reencap", Baseline: "end",
		Desc:  "seed 002: End vs the decapsulate + netfilter + re-encapsulate workaround",
		Cases: []Case{CasePlain, CaseEnd, CaseDT6, CaseDT6NftEncap, CaseDX4NftEncap},
	})
	Register(&Scenario{
		Name: "nft-rules", Baseline: "plain", XLabel: "rules",
		Desc:  "seed 000 Exp. 1 shape: forwarding rate vs nftables forward chain length",
		Cases: append([]Case{CasePlain}, ruleCases(CaseNft, 1, 8, 32, 64, 128, 256, 512)...),
	})
	Register(&Scenario{
		Name: "ip6t-srh-rules", Baseline: "end", XLabel: "rules",
		Desc:  "seed 000 Exp. 4/5 shape: End + ip6tables -m srh chain length",
		Cases: append([]Case{CaseEnd}, ruleCases(CaseIP6tSRH, 1, 8, 32, 64, 128, 256, 512)...),
	})
	Register(&Scenario{
		Name: "smoke", Baseline: "plain",
		Desc:  "two cases, for the e2e smoke test",
		Cases: []Case{CasePlain, CaseEnd},
	})
}
