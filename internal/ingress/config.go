// Package ingress is srchain's eBPF ingress (headend): it steers packets
// into chains at a router whose spec says `ingress: ebpf`, classifying
// them with the firewall's bit-vector engine (internal/firewall compiles
// the chains' matches into the classifier maps of bpf/ingress.c: one
// classifier, one compiler) and performing H.Encaps / H.Insert itself
// (bpf/lib/srv6_encap.h, bpf/lib/ingress.h), with no `ip rule` per chain.
// Its output is the kernel's seg6 encap's, byte for byte
// (test/e2e/ingress_diff_test.go). docs/datapath.md "The ingress
// program" has the design.
//
// The compiler emits one state.Program of kind Program per such node,
// its Config the JSON of Config; the driver (Driver, registered with
// internal/kind) loads, pins under kind.PinDir(ns)/ingress, attaches to
// every interface of the node and swaps in a new chain set atomically
// (the classifier's two generations, one word flips them).
package ingress

import (
	"cmp"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/srchain/srchain/internal/firewall"
	"github.com/srchain/srchain/internal/state"
)

// Program is the state.Program kind of the eBPF ingress.
const Program = "ingress"

// ErrInvalid: a config the ingress cannot run (bad segments, family,
// too many classifier entries).
var ErrInvalid = errors.New("invalid ingress config")

// Config is the typed configuration of the ingress program of one node
// (state.Program.Config). Everything the driver needs is here or on the
// node (TunSrc); the hop limit of IPv4 packets and the flow label mode
// are read from the node's sysctls at apply time, as the kernel reads
// them per packet.
type Config struct {
	// XDP also attaches the XDP fast path (bpf/ingress.c
	// srchain_ingress_xdp) in front of the tc program.
	XDP bool `json:"xdp,omitempty"`
	// Chains in classification order (see Rules).
	Chains []Chain `json:"chains"`
}

// Chain is one chain the node is the ingress of.
type Chain struct {
	Name string          `json:"name"`
	Mode state.EncapMode `json:"mode"`
	// Segments in travel order: encap mode, the NF SIDs and the egress
	// SID; insert mode, the NF SIDs (segment[0] of the SRH is the
	// packet's destination).
	Segments []netip.Addr `json:"segments"`
	// Dev is the device of the chain's kernel policy route: the outer
	// hop limit of an IPv4 packet is its IPv6 hop_limit, as the kernel's
	// ip6_dst_hoplimit takes it.
	Dev string `json:"dev"`
	// Match (the spec's classifier): destinations, sources (none: any),
	// IP protocol (0: any), port ranges (zero: any).
	Dst   []netip.Prefix  `json:"dst"`
	Src   []netip.Prefix  `json:"src,omitempty"`
	Proto uint8           `json:"proto,omitempty"`
	SPort state.PortRange `json:"sport,omitzero"`
	DPort state.PortRange `json:"dport,omitzero"`
	// Ext is the headend extension hook (bpf/lib/ingress.h
	// ing_headend_ext): OPoT (issue 11) will set the profile slot whose
	// TLV the headend adds to this chain's SRH. 0: none. Until an
	// extension is built, packets of a chain with Ext set are left to
	// the stack unencapsulated.
	Ext uint32 `json:"ext,omitempty"`
}

// FiveTuple reports whether the chain's match is more than destinations
// (the kernel needs an ip rule for it).
func (c Chain) FiveTuple() bool {
	return len(c.Src) > 0 || c.Proto != 0 || c.SPort != (state.PortRange{}) || c.DPort != (state.PortRange{})
}

// Entry is one classifier rule: the rule and the chain it steers into
// (index into Config.Chains).
type Entry struct {
	Rule  firewall.Rule
	Chain int
}

// Rules turns the chains into classifier rules, first match wins, in
// the order the kernel's routing decides: 5-tuple chains by chain order
// (their ip rules have priority 1000 + index, before the main table),
// then destination-only chains by longest prefix (their routes in the
// main table), ties by chain order. One rule per destination x source
// pair; a rule carries its family (IPv4 prefixes IPv4-mapped, as the
// firewall keeps them) so an IPv4 chain never matches IPv6 and the
// reverse.
func (cfg Config) Rules() ([]Entry, error) {
	type item struct {
		chain int
		dst   netip.Prefix
	}
	var five, plain []item
	for i, c := range cfg.Chains {
		if err := c.check(); err != nil {
			return nil, err
		}
		for _, d := range c.Dst {
			if c.FiveTuple() {
				five = append(five, item{i, d})
			} else {
				plain = append(plain, item{i, d})
			}
		}
	}
	slices.SortStableFunc(plain, func(a, b item) int { return cmp.Compare(b.dst.Bits(), a.dst.Bits()) })
	var out []Entry
	for _, it := range append(five, plain...) {
		c := cfg.Chains[it.chain]
		srcs := c.Src
		if len(srcs) == 0 {
			srcs = []netip.Prefix{{}}
		}
		for _, s := range srcs {
			out = append(out, Entry{Rule: c.rule(it.dst, s), Chain: it.chain})
		}
	}
	if len(out) > firewall.MaxRules {
		return nil, fmt.Errorf("%w: %d classifier entries, at most %d", ErrInvalid, len(out), firewall.MaxRules)
	}
	return out, nil
}

func (c Chain) check() error {
	if len(c.Dst) == 0 {
		return fmt.Errorf("%w: chain %s has no destination", ErrInvalid, c.Name)
	}
	n := len(c.Segments)
	if c.Mode == state.ModeInsert {
		n++
	} else if c.Mode != state.ModeEncap {
		return fmt.Errorf("%w: chain %s: mode %q", ErrInvalid, c.Name, c.Mode)
	}
	if len(c.Segments) == 0 || n > maxSegs {
		return fmt.Errorf("%w: chain %s: %d segments, 1..%d", ErrInvalid, c.Name, n, maxSegs)
	}
	fam := c.Dst[0].Addr().Is4()
	for _, p := range append(slices.Clone(c.Dst), c.Src...) {
		if !p.IsValid() || p.Addr().Is4() != fam {
			return fmt.Errorf("%w: chain %s mixes address families", ErrInvalid, c.Name)
		}
	}
	if fam && c.Mode == state.ModeInsert {
		return fmt.Errorf("%w: chain %s: H.Insert needs IPv6", ErrInvalid, c.Name)
	}
	for _, s := range c.Segments {
		if !s.Is6() || s.Is4In6() {
			return fmt.Errorf("%w: chain %s: segment %v is not IPv6", ErrInvalid, c.Name, s)
		}
	}
	return nil
}

// maxSegs is SRCHAIN_MAX_SEGS (bpf/lib/common.h).
const maxSegs = 16

// rule is the classifier rule of one (destination, source) pair.
func (c Chain) rule(dst, src netip.Prefix) firewall.Rule {
	fam := uint32(6)
	if dst.Addr().Is4() {
		fam = 4
	}
	r := firewall.Rule{Verdict: firewall.Accept, Text: c.Name}
	r.Conds = append(r.Conds, firewall.Cond{Field: firewall.FDst, Prefix: mapped(dst)},
		firewall.Cond{Field: firewall.FFamily, Lo: fam, Hi: fam})
	if src.IsValid() {
		r.Conds = append(r.Conds, firewall.Cond{Field: firewall.FSrc, Prefix: mapped(src)})
	}
	if c.Proto != 0 {
		r.Conds = append(r.Conds, firewall.Cond{Field: firewall.FProto, Lo: uint32(c.Proto), Hi: uint32(c.Proto)})
	}
	if c.SPort != (state.PortRange{}) {
		r.Conds = append(r.Conds, firewall.Cond{Field: firewall.FSPort, Lo: uint32(c.SPort.From), Hi: uint32(c.SPort.To)})
	}
	if c.DPort != (state.PortRange{}) {
		r.Conds = append(r.Conds, firewall.Cond{Field: firewall.FDPort, Lo: uint32(c.DPort.From), Hi: uint32(c.DPort.To)})
	}
	return r
}

// mapped is p in the firewall's address space (IPv4 as IPv4-mapped IPv6).
func mapped(p netip.Prefix) netip.Prefix {
	if p.Addr().Is4() {
		return netip.PrefixFrom(netip.AddrFrom16(p.Addr().As16()), p.Bits()+96)
	}
	return p
}

// Settings are what the driver reads from the node at apply time.
type Settings struct {
	TunSrc netip.Addr
	// FlowLabel is net.ipv6.seg6_flowlabel (-1, 0, 1).
	FlowLabel int
	// HopLimit4 maps a chain's Dev to its net.ipv6.conf.DEV.hop_limit.
	HopLimit4 map[string]uint8
}

// Hash identifies a config with its settings: the driver stores it with
// the tables so Check can tell whether what runs is what is desired.
func (cfg Config) Hash(s Settings) [32]byte {
	h := sha256.New()
	fmt.Fprintf(h, "tunsrc %v flowlabel %d xdp %v\n", s.TunSrc, s.FlowLabel, cfg.XDP)
	for _, c := range cfg.Chains {
		fmt.Fprintf(h, "chain %q %s %v %q %d %v %v %d %v %v %d\n", c.Name, c.Mode, c.Segments, c.Dev,
			s.HopLimit4[c.Dev], c.Dst, c.Src, c.Proto, c.SPort, c.DPort, c.Ext)
	}
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}
