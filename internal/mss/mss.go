// Package mss clamps the TCP MSS of connections whose packets cross an
// SRv6 chain, so that TCP works at its default MSS on links whose MTU
// has no room for the chain's headers (issue 34; docs/datapath.md "MTU
// and MSS through a chain").
//
// The kernel's seg6 encap is reached from the input route lookup
// (lwtunnel input redirect) before ip_forward / ip6_forward, so an
// oversized packet is never answered to its sender: the encapsulated
// packet fails the outer MTU check and the Packet Too Big goes to the
// router itself. TCP then stalls. srchain owns one nftables table per
// node, srchain_mss, whose prerouting chain (before the route lookup,
// so before the encap) lowers the MSS option of the SYN and SYN-ACK
// segments of every chain the node is the ingress of, both ways, to
// what fits the chain (state.Route.MSS): the segments then fit, end to
// end, whoever sends them. The eBPF ingress leaves SYNs to this path.
package mss

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/nft"
	"github.com/srchain/srchain/internal/state"
)

// Table is the nftables table (family inet) srchain owns for the clamp.
const Table = "srchain_mss"

// Clamp lowers to MSS the MSS option of TCP SYNs from Src (invalid:
// any) to Dst, ports SPort and DPort when set, and of those going the
// other way.
type Clamp struct {
	Chain        string
	Dst, Src     netip.Prefix
	SPort, DPort state.PortRange
	MSS          int
}

// Clamps derives a node's clamps from its chains' policy routes (MSS
// set) and, for a 5-tuple chain, the rules that steer into them: one
// clamp per rule (source, destination, ports) or, for a destination
// chain, per route. Sorted, so equal nodes give equal clamps.
func Clamps(n state.Node) []Clamp { return ClampsOf(n.Routes, n.Rules) }

// ClampsOf is Clamps of a node's routes and rules (a node joined from
// parts need not be built for it).
func ClampsOf(routes []state.Route, ruleList []state.Rule) []Clamp {
	rules := map[string][]state.Rule{}
	for _, r := range ruleList {
		if r.Chain != "" {
			rules[r.Chain] = append(rules[r.Chain], r)
		}
	}
	var out []Clamp
	for _, r := range routes {
		if r.MSS == 0 || r.Encap == nil || r.Chain == "" {
			continue
		}
		if r.Table == 0 || len(rules[r.Chain]) == 0 {
			out = append(out, Clamp{Chain: r.Chain, Dst: r.Dst, MSS: r.MSS})
			continue
		}
		for _, ru := range rules[r.Chain] {
			if ru.Dst == r.Dst && (ru.IPProto == 0 || ru.IPProto == 6) {
				out = append(out, Clamp{Chain: r.Chain, Dst: ru.Dst, Src: ru.Src, SPort: ru.SPort, DPort: ru.DPort, MSS: r.MSS})
			}
		}
	}
	slices.SortFunc(out, func(a, b Clamp) int {
		return cmp.Or(cmp.Compare(a.Chain, b.Chain), a.Dst.Addr().Compare(b.Dst.Addr()), cmp.Compare(a.Dst.Bits(), b.Dst.Bits()),
			a.Src.Addr().Compare(b.Src.Addr()), cmp.Compare(a.Src.Bits(), b.Src.Bits()),
			cmp.Compare(a.SPort.From, b.SPort.From), cmp.Compare(a.DPort.From, b.DPort.From))
	})
	return slices.Compact(out)
}

// Body is the table's body for clamps: a prerouting chain at mangle
// priority, two rules per clamp (forward and reverse), each matching
// only SYNs whose MSS option is larger than the clamp.
func Body(clamps []Clamp) string {
	var b strings.Builder
	b.WriteString("chain prerouting {\n\ttype filter hook prerouting priority mangle; policy accept;\n")
	for _, c := range clamps {
		fmt.Fprintf(&b, "\t%s\n", rule(c.Src, c.Dst, c.SPort, c.DPort, c.MSS, c.Chain))
		fmt.Fprintf(&b, "\t%s\n", rule(c.Dst, c.Src, c.DPort, c.SPort, c.MSS, c.Chain+" reverse"))
	}
	b.WriteString("}\n")
	return b.String()
}

// rule is one clamp: TCP from src to dst (an invalid prefix: any
// address of the other's family) with the given ports.
func rule(src, dst netip.Prefix, sport, dport state.PortRange, mss int, comment string) string {
	v4 := (dst.IsValid() && dst.Addr().Is4()) || (src.IsValid() && src.Addr().Is4())
	fam, proto := "ip6", "ipv6"
	if v4 {
		fam, proto = "ip", "ipv4"
	}
	m := []string{"meta nfproto " + proto}
	if src.IsValid() {
		m = append(m, fam+" saddr "+src.Masked().String())
	}
	if dst.IsValid() {
		m = append(m, fam+" daddr "+dst.Masked().String())
	}
	m = append(m, "meta l4proto tcp")
	if sport != (state.PortRange{}) {
		m = append(m, "tcp sport "+ports(sport))
	}
	if dport != (state.PortRange{}) {
		m = append(m, "tcp dport "+ports(dport))
	}
	m = append(m, "tcp flags & syn == syn",
		fmt.Sprintf("tcp option maxseg size > %d tcp option maxseg size set %d", mss, mss),
		fmt.Sprintf("comment %q", comment))
	return strings.Join(m, " ")
}

func ports(r state.PortRange) string {
	if r.From == r.To {
		return fmt.Sprint(r.From)
	}
	return fmt.Sprintf("%d-%d", r.From, r.To)
}

// Current is the table as it runs in ns ("" when absent).
func Current(ctx context.Context, ns *netns.NS) (string, error) {
	return nft.ListTable(ctx, ns, Table)
}

// Holds reports whether the listing cur runs clamps (no clamps: no
// table).
func Holds(cur string, clamps []Clamp) bool {
	if len(clamps) == 0 {
		return cur == ""
	}
	return strings.Contains(cur, nft.Digest(Body(clamps)))
}

// Set makes ns run clamps (none: removes the table), in one nft
// transaction.
func Set(ctx context.Context, ns *netns.NS, clamps []Clamp) error {
	if len(clamps) == 0 {
		return Restore(ctx, ns, "")
	}
	if err := nft.Load(ctx, ns, nft.Replace(Table, Body(clamps)), nft.Prologue); err != nil {
		return fmt.Errorf("set mss clamp: %w", err)
	}
	return nil
}

// Restore puts back a listing Current returned ("" deletes the table).
func Restore(ctx context.Context, ns *netns.NS, listing string) error {
	return nft.Restore(ctx, ns, map[string]string{Table: listing}, Table)
}
