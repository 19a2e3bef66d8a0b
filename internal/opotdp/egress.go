package opotdp

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/state"
)

// The egress that cannot be bypassed (docs/opot.md "Egress: nothing
// decapsulates unproven"; bpf/lib/opot_egress.h): the verifier takes
// every packet whose DA falls in a verified chain's egress SID prefix
// (opot_egress, longest prefix), and a policy rule per prefix blackholes
// what it did not mark before the kernel's decap route sees it.
const (
	// MarkVerified is OPOT_MARK_VERIFIED: the skb->mark bit the verifier
	// sets on a packet whose proof it accepted. One of srchain's bits
	// (0xffff0000) that End.AN.NF's mark leaves free.
	MarkVerified = 0x40000000
	// RulePref is the priority of the egress rules: after the local
	// table (0), before End.AN.NF's fwmark rule (900), the chains' rules
	// (1000 + i) and the main table (32766).
	RulePref = 800
)

// EgressKey is the key of opot_egress (struct opot_egress_key).
type EgressKey = opotProgOpotEgressKey

// egressKeyOf is p's key in opot_egress.
func egressKeyOf(p netip.Prefix) EgressKey {
	return EgressKey{Prefixlen: uint32(p.Bits()), Addr: p.Addr().As16()}
}

// EgressPrefix is the prefix of a verifier entry: its SID (the DA the
// packet arrives with) over the egress SID route's length.
func EgressPrefix(ch state.OPoTChain) (netip.Prefix, error) {
	bits := ch.SIDBits
	if bits == 0 {
		bits = 128
	}
	p, err := ch.SID.Prefix(bits)
	if err != nil || !ch.SID.Is6() {
		return netip.Prefix{}, fmt.Errorf("opot chain %s: %w: egress SID %s/%d", ch.Name, ErrConfig, ch.SID, bits)
	}
	return p, nil
}

// egressWant is what opot_egress must hold: each verifier entry's prefix
// to its chain key.
func egressWant(cfg state.OPoTConfig) (map[EgressKey]ChainKey, error) {
	out := map[EgressKey]ChainKey{}
	for _, ch := range cfg.Chains {
		if ch.Role != state.OPoTVerifier {
			continue
		}
		p, err := EgressPrefix(ch)
		if err != nil {
			return nil, err
		}
		k := egressKeyOf(p)
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("opot chain %s: %w: egress SID prefix %s verified for two chains", ch.Name, ErrConfig, p)
		}
		out[k] = ChainKey{Last: ch.Last.As16()}
	}
	return out, nil
}

func dumpEgress(m *ebpf.Map) (map[EgressKey]ChainKey, error) {
	out := map[EgressKey]ChainKey{}
	var k EgressKey
	var v ChainKey
	it := m.Iterate()
	for it.Next(&k, &v) {
		out[k] = v
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read opot egress prefixes: %w", err)
	}
	return out, nil
}

// syncEgress makes opot_egress hold want, journaling what it changes.
func syncEgress(dir string, m *ebpf.Map, want map[EgressKey]ChainKey, j *journal) error {
	have, err := dumpEgress(m)
	if err != nil {
		return err
	}
	for k, v := range want {
		if old, ok := have[k]; ok && old == v {
			continue
		}
		if err := m.Put(&k, &v); err != nil {
			return fmt.Errorf("write opot egress prefix: %w", err)
		}
		*j = append(*j, restore(dir, "opot_egress", k, have[k]))
	}
	for k, old := range have {
		if _, ok := want[k]; ok {
			continue
		}
		if err := m.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("delete opot egress prefix: %w", err)
		}
		*j = append(*j, restore(dir, "opot_egress", k, old))
	}
	return nil
}

// egressRule is the rule that drops, before any route, what the verifier
// did not mark among the packets to p: `ip -6 rule add pref 800 to p
// fwmark 0/0x40000000 blackhole` (fwmark 0 with a mask matches a mark
// whose masked bits are all zero).
func egressRule(p netip.Prefix) *netlink.Rule {
	r := netlink.NewRule()
	r.Family = unix.AF_INET6
	r.Priority = RulePref
	r.Dst = &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 128)}
	mask := uint32(MarkVerified)
	r.Mask = &mask
	r.Type = nl.FR_ACT_BLACKHOLE
	return r
}

// isEgressRule reports whether r is one of the driver's rules, and its
// prefix. netlink's dump leaves the rule's action out (Rule.Type): the
// driver's rules are those at RulePref with its mark selector.
func isEgressRule(r netlink.Rule) (netip.Prefix, bool) {
	if r.Priority != RulePref || r.Mark != 0 || r.Mask == nil || *r.Mask != MarkVerified || r.Dst == nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(r.Dst.IP)
	ones, _ := r.Dst.Mask.Size()
	if !ok {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a.Unmap(), ones), true
}

// egressRules lists the driver's rules in ns.
func egressRules(ns *netns.NS) (map[netip.Prefix]bool, error) {
	f := netlink.NewRule()
	f.Priority = RulePref
	rs, err := ns.Netlink().RuleListFiltered(unix.AF_INET6, f, netlink.RT_FILTER_PRIORITY)
	if err != nil {
		return nil, fmt.Errorf("list opot egress rules: %w", err)
	}
	out := map[netip.Prefix]bool{}
	for _, r := range rs {
		if p, ok := isEgressRule(r); ok {
			out[p] = true
		}
	}
	return out, nil
}

// wantRules is the set of prefixes the rules must cover.
func wantRules(want map[EgressKey]ChainKey) map[netip.Prefix]bool {
	out := map[netip.Prefix]bool{}
	for k := range want {
		out[netip.PrefixFrom(netip.AddrFrom16(k.Addr), int(k.Prefixlen)).Masked()] = true
	}
	return out
}

// syncRules adds the missing rules and deletes the driver's others,
// journaling each change. It runs after the verifier stages and
// opot_egress are in place: a rule before them would blackhole the
// chain's legitimate packets too.
func syncRules(ns *netns.NS, want map[EgressKey]ChainKey, j *journal) error {
	have, err := egressRules(ns)
	if err != nil {
		return err
	}
	h := ns.Netlink()
	w := wantRules(want)
	for _, p := range slices.SortedFunc(maps.Keys(w), state.ComparePrefix) {
		if have[p] {
			continue
		}
		r := egressRule(p)
		if err := h.RuleAdd(r); err != nil {
			return fmt.Errorf("add opot egress rule to %s: %w", p, err)
		}
		*j = append(*j, func() error { return h.RuleDel(r) })
	}
	for p := range have {
		if w[p] {
			continue
		}
		r := egressRule(p)
		if err := h.RuleDel(r); err != nil {
			return fmt.Errorf("delete opot egress rule to %s: %w", p, err)
		}
		*j = append(*j, func() error { return h.RuleAdd(r) })
	}
	return nil
}

// rulesDrift is what Check reports about the rules.
func rulesDrift(ns *netns.NS, want map[EgressKey]ChainKey) ([]string, error) {
	have, err := egressRules(ns)
	if err != nil {
		return nil, err
	}
	var drift []string
	w := wantRules(want)
	for _, p := range slices.SortedFunc(maps.Keys(w), state.ComparePrefix) {
		if !have[p] {
			drift = append(drift, fmt.Sprintf("opot egress rule missing: ip -6 rule pref %d to %s fwmark 0/0x%x blackhole", RulePref, p, MarkVerified))
		}
	}
	for _, p := range slices.SortedFunc(maps.Keys(have), state.ComparePrefix) {
		if !w[p] {
			drift = append(drift, fmt.Sprintf("opot egress rule to %s: no chain verified there", p))
		}
	}
	return drift, nil
}

// removeRules deletes every rule of the driver in ns.
func removeRules(ns *netns.NS) error {
	have, err := egressRules(ns)
	if err != nil {
		return err
	}
	var errs []error
	for p := range have {
		if err := ns.Netlink().RuleDel(egressRule(p)); err != nil {
			errs = append(errs, fmt.Errorf("delete opot egress rule to %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}
