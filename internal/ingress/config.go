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
const Program = state.ProgramIngress

// ErrInvalid: a config the ingress cannot run (bad segments, family,
// too many classifier entries).
var ErrInvalid = errors.New("invalid ingress config")

// Config is the typed configuration of the ingress program of one node
// (state.Program.Config), Chain one of its chains.
type (
	Config = state.IngressConfig
	Chain  = state.IngressChain
)

// FiveTuple reports whether the chain's match is more than destinations
// (the kernel needs an ip rule for it).
func FiveTuple(c Chain) bool {
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
func Rules(cfg Config) ([]Entry, error) {
	type item struct {
		chain int
		dst   netip.Prefix
	}
	var five, plain []item
	for i, c := range cfg.Chains {
		if err := check(c); err != nil {
			return nil, err
		}
		for _, d := range c.Dst {
			if FiveTuple(c) {
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
			out = append(out, Entry{Rule: rule(c, it.dst, s), Chain: it.chain})
		}
	}
	variants := 0
	for _, c := range cfg.Chains {
		if c.Pool != nil {
			variants += len(c.Pool.Variants)
		}
	}
	if variants > VariantSlots {
		return nil, fmt.Errorf("%w: %d pool variants, at most %d", ErrInvalid, variants, VariantSlots)
	}
	if len(out) > firewall.MaxRules {
		return nil, fmt.Errorf("%w: %d classifier entries, at most %d", ErrInvalid, len(out), firewall.MaxRules)
	}
	return out, nil
}

func check(c Chain) error {
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
	if p := c.Pool; p != nil {
		if c.Mode != state.ModeEncap || len(p.Variants) < 1 || len(p.Variants) > MaxVariants || len(p.NFs) != len(p.Variants) {
			return fmt.Errorf("%w: chain %s: pool %s: encap mode and 1..%d variants, one per NF", ErrInvalid, c.Name, p.Name, MaxVariants)
		}
		for _, v := range p.Variants {
			if len(v) == 0 || len(v) > maxSegs || slices.ContainsFunc(v, func(a netip.Addr) bool { return !a.Is6() || a.Is4In6() }) {
				return fmt.Errorf("%w: chain %s: pool %s: a variant of %d segments (1..%d IPv6)", ErrInvalid, c.Name, p.Name, len(v), maxSegs)
			}
		}
	}
	return nil
}

// maxSegs is SRCHAIN_MAX_SEGS (bpf/lib/common.h).
const maxSegs = 16

// rule is the classifier rule of one (destination, source) pair.
func rule(c Chain, dst, src netip.Prefix) firewall.Rule {
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
	// FIBDirect: every ip rule of the node is the kernel's (local, main,
	// default) or srchain's (routing protocol RTProto): the program looks
	// the first segment up in the main table directly, not through the
	// chains' rules (ing_config.fib_direct).
	FIBDirect bool
}

// RTProto is the routing protocol number of srchain's routes and rules
// (internal/apply RTProto).
const RTProto = 83

// Hash identifies a config with its settings: the driver stores it with
// the tables so Check can tell whether what runs is what is desired.
func Hash(cfg Config, s Settings) [32]byte {
	h := sha256.New()
	fmt.Fprintf(h, "tunsrc %v flowlabel %d direct %v\n", s.TunSrc, s.FlowLabel, s.FIBDirect)
	for _, c := range cfg.Chains {
		fmt.Fprintf(h, "chain %q %s %v %q %d %v %v %d %v %v %d\n", c.Name, c.Mode, c.Segments, c.Dev,
			s.HopLimit4[c.Dev], c.Dst, c.Src, c.Proto, c.SPort, c.DPort, c.Ext)
		if p := c.Pool; p != nil {
			fmt.Fprintf(h, "pool %q %q %v %v\n", p.Name, p.Pick, p.NFs, p.Variants)
		}
	}
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}
