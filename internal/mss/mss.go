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
// so before the encap) lowers the MSS option of SYN and SYN-ACK segments
// of every chain's flows, in both directions, at the chain's ingress and
// egress routers, to what fits the chain: the segments then fit, end to
// end, whoever sends them.
package mss

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/srchain/srchain/internal/kind"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/nft"
	"github.com/srchain/srchain/internal/state"
)

// Program is the node-wide program kind of the clamp (no interfaces).
const Program = state.ProgramMSS

// Table is the nftables table (family inet) the driver owns.
const Table = "srchain_mss"

// ErrConfig: a clamp that cannot be written as a rule.
var ErrConfig = errors.New("bad mss clamp")

// Config is a node's clamp (state.MSSConfig).
type Config = state.MSSConfig

// Clamp is one chain's clamp (state.MSSClamp).
type Clamp = state.MSSClamp

// Body is the table's body for cfg: a prerouting chain at mangle
// priority, two rules per source x destination pair (forward and
// reverse), each matching only SYNs whose MSS is larger than the clamp.
func Body(cfg Config) (string, error) {
	var b strings.Builder
	b.WriteString("chain prerouting {\n\ttype filter hook prerouting priority mangle; policy accept;\n")
	for _, c := range cfg.Clamps {
		if c.MSS < 536 || c.MSS > 65535 {
			return "", fmt.Errorf("clamp chain %s: %w: mss %d (want 536..65535)", c.Chain, ErrConfig, c.MSS)
		}
		srcs := c.Src
		if len(srcs) == 0 {
			srcs = []netip.Prefix{{}}
		}
		for _, dst := range c.Dst {
			for _, src := range srcs {
				if src.IsValid() && src.Addr().Is4() != dst.Addr().Is4() {
					continue
				}
				fmt.Fprintf(&b, "\t%s\n", rule(dst, src, c.SPort, c.DPort, c.MSS, c.Chain))
				fmt.Fprintf(&b, "\t%s\n", rule(src, dst, c.DPort, c.SPort, c.MSS, c.Chain+" reverse"))
			}
		}
	}
	b.WriteString("}\n")
	return b.String(), nil
}

// rule is one clamp: TCP from src (invalid: any of dst's family) to dst
// with the given ports.
func rule(dst, src netip.Prefix, sport, dport state.PortRange, mss int, comment string) string {
	fam := "ip6"
	if (dst.IsValid() && dst.Addr().Is4()) || (!dst.IsValid() && src.Addr().Is4()) {
		fam = "ip"
	}
	var m []string
	if !dst.IsValid() {
		m = append(m, "meta nfproto "+map[string]string{"ip": "ipv4", "ip6": "ipv6"}[fam])
	}
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

func init() { kind.RegisterDriver(Program, Driver{}) }

// Driver applies a node's clamp: the table srchain_mss replaced in one
// nft transaction; the undo puts the previous table back.
type Driver struct{}

func configOf(p state.Program) (Config, error) {
	var cfg Config
	if err := json.Unmarshal(p.Config, &cfg); err != nil {
		return cfg, fmt.Errorf("decode mss config: %w", err)
	}
	return cfg, nil
}

// Apply implements kind.Driver.
func (Driver) Apply(ctx context.Context, ns *netns.NS, _ state.Node, p state.Program) (func() error, error) {
	cfg, err := configOf(p)
	if err != nil {
		return nil, err
	}
	body, err := Body(cfg)
	if err != nil {
		return nil, err
	}
	prev, err := nft.ListTable(ctx, ns, Table)
	if err != nil {
		return nil, fmt.Errorf("apply mss clamp: %w", err)
	}
	if strings.Contains(prev, nft.Digest(body)) {
		return nil, nil // as desired: no change
	}
	if err := nft.Load(ctx, ns, nft.Replace(Table, body), nft.Prologue); err != nil {
		return nil, fmt.Errorf("apply mss clamp: %w", err)
	}
	return func() error {
		return nft.Restore(context.Background(), ns, map[string]string{Table: prev}, Table)
	}, nil
}

// Check implements kind.Driver: the table must hold this config's body.
func (Driver) Check(ctx context.Context, ns *netns.NS, _ state.Node, p state.Program) ([]string, error) {
	cfg, err := configOf(p)
	if err != nil {
		return nil, err
	}
	body, err := Body(cfg)
	if err != nil {
		return nil, err
	}
	cur, err := nft.ListTable(ctx, ns, Table)
	if err != nil {
		return nil, err
	}
	switch {
	case cur == "":
		return []string{"nft table " + Table + " missing"}, nil
	case !strings.Contains(cur, nft.Digest(body)):
		return []string{"nft table " + Table + " differs from the desired clamp"}, nil
	}
	return nil, nil
}

// Remove implements kind.Driver.
func (Driver) Remove(ctx context.Context, ns *netns.NS, _ state.Node, _ state.Program) error {
	return nft.Restore(ctx, ns, map[string]string{Table: ""}, Table)
}

// Counters implements kind.Driver: the clamp counts nothing.
func (Driver) Counters(context.Context, *netns.NS, state.Node, state.Program) ([]kind.Counter, error) {
	return nil, nil
}
