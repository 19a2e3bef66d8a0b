package spec

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
)

// One chain at a time: the controller's fast path for a write that
// changes one chain of a large spec (issue 12: one chain change in under
// 50 ms at 10,000 chains). Validate and Compile cost O(chains); a chain
// whose checks and state do not involve the other chains beyond a few
// cross-checks (names, steered destinations, SIDs) can be checked and
// compiled alone. Whatever this cannot decide alone is ErrNotAlone, and
// the caller validates the whole spec instead, which also gives the
// reference error messages: the fast path only ever says "valid".

// ErrNotAlone: the chain cannot be checked (or compiled) without the rest
// of the spec; do the whole spec.
var ErrNotAlone = errors.New("chain cannot be handled alone")

// ParseChain decodes one chain object (JSON or YAML flow) as Parse decodes
// each chain of a document, defaults applied. Pools are not resolved:
// ChainAlone refuses specs with pools.
func ParseChain(data []byte) (Chain, error) {
	doc := make([]byte, 0, len(data)+16)
	doc = append(append(append(doc, `{"chains":[`...), data...), "]}"...)
	s, err := Parse(doc, "")
	if err != nil {
		return Chain{}, err
	}
	if len(s.Chains) != 1 {
		return Chain{}, fmt.Errorf("decode chain: %d chains", len(s.Chains))
	}
	return s.Chains[0], nil
}

// WithChains returns a copy of s holding chains instead of its own. The
// copy shares s's caches (files, shortest paths), which depend only on
// what the two have in common.
func (s *Spec) WithChains(chains []Chain) *Spec {
	c := *s
	c.Chains = chains
	return &c
}

// ChainAlone reports ErrNotAlone unless chain c of s can be validated and
// compiled without the other chains: no pools in the spec, and the chain
// does not split into pathlets, compress, carry OPoT, set its own egress
// SID or start at an eBPF ingress (whose program holds every chain), and
// each of its NFs is of a kind that reads no chain (ChainBlindKinds).
func (s *Spec) ChainAlone(c *Chain) error {
	why := ""
	switch n := s.Node(c.Ingress); {
	case len(s.Pools) > 0:
		why = "the spec has pools"
	case c.Splits():
		why = "it splits into pathlets"
	case c.Compression != "":
		why = "it is compressed"
	case c.OPoT:
		why = "it carries opot"
	case c.EgressSID.IsValid():
		why = "it sets egress_sid"
	case n == nil || n.Ingress == IngressEBPF:
		why = "its ingress is not a kernel ingress"
	}
	for _, name := range c.NFs {
		nf := s.NF(name)
		if cb, ok := kinds.(ChainBlindKinds); why == "" && (nf == nil || !ok || !cb.IgnoresChains(nf.Kind)) {
			why = fmt.Sprintf("NF %s is not of a kind that ignores chains", Clip(name))
		}
	}
	if why != "" {
		return fmt.Errorf("chain %s: %s: %w", Clip(c.Name), why, ErrNotAlone)
	}
	return nil
}

// ValidateChain checks chain i of s, where s without chain i passed
// Validate and plan is s.SIDs(): the chain's own checks are Validate's,
// run on s reduced to that chain (its SIDs pinned to plan's), and
// its checks against the other chains are done here, linear in chains.
// Any problem is returned as is, without a field path promise: the
// caller validates the whole spec for the report. The chain must pass
// ChainAlone.
func (s *Spec) ValidateChain(i int, plan SIDPlan) error {
	if i < 0 || i >= len(s.Chains) {
		return fmt.Errorf("validate chain %d of %d: %w", i, len(s.Chains), ErrNotAlone)
	}
	c := s.Chains[i]
	if err := s.ChainAlone(&c); err != nil {
		return err
	}
	if len(s.Chains) > MaxChains {
		return fmt.Errorf("%d chains, at most %d", len(s.Chains), MaxChains)
	}
	if len(plan.Errors) > 0 {
		return fmt.Errorf("SID allocation: %v", plan.Errors)
	}
	egress, hasEgress := plan.Egress[c.Name]
	if c.Mode == ModeEncap {
		if !hasEgress {
			return fmt.Errorf("chain %s: no egress SID: %w", Clip(c.Name), ErrNotAlone)
		}
		c.EgressSID = egress.Addr()
	}
	// The reduced spec allocates no SID of its own: NF SIDs are pinned
	// to plan's too (the full spec's explicit egress SIDs are marked
	// used before NF SIDs are allocated).
	r := s.WithChains([]Chain{c})
	r.NFs = slices.Clone(s.NFs)
	for k := range r.NFs {
		if sid, ok := plan.NF[r.NFs[k].Name]; ok {
			r.NFs[k].SID = sid.Addr()
		}
	}
	if err := r.Validate(); err != nil {
		return err
	}
	five := c.Match.HasFiveTuple()
	for j := range s.Chains {
		if j == i {
			continue
		}
		o := &s.Chains[j]
		if o.Name == c.Name {
			return fmt.Errorf("duplicate chain %q", c.Name)
		}
		if !five && !o.Match.HasFiveTuple() && o.Ingress == c.Ingress {
			for _, d := range c.Match.Dst {
				if slices.ContainsFunc(o.Match.Dst, func(e netip.Prefix) bool { return e.Masked() == d.Masked() }) {
					return fmt.Errorf("%s is already steered at %s by chain %q", d, c.Ingress, o.Name)
				}
			}
		}
		if sid, ok := plan.Egress[o.Name]; ok {
			if overlapsAny(sid, c.Match.Dst, c.Match.Src) {
				return fmt.Errorf("chain %s matches egress SID %s of chain %q", c.Name, sid, o.Name)
			}
			if hasEgress && sid.Masked().Overlaps(egress.Masked()) {
				return fmt.Errorf("egress SID %s collides with that of chain %q", egress, o.Name)
			}
		}
		if hasEgress && overlapsAny(egress, o.Match.Dst, o.Match.Src) {
			return fmt.Errorf("chain %q matches egress SID %s of chain %s", o.Name, egress, c.Name)
		}
	}
	if hasEgress {
		for name, sid := range plan.NF {
			if sid.Masked().Overlaps(egress.Masked()) {
				return fmt.Errorf("egress SID %s collides with the SID of NF %q", egress, name)
			}
		}
		for _, sids := range plan.Binding {
			for _, sid := range sids {
				if sid.Masked().Overlaps(egress.Masked()) {
					return fmt.Errorf("egress SID %s collides with binding SID %s", egress, sid)
				}
			}
		}
		for _, sid := range plan.PathletEnd {
			if sid.Masked().Overlaps(egress.Masked()) {
				return fmt.Errorf("egress SID %s collides with pathlet end SID %s", egress, sid)
			}
		}
	}
	return nil
}

// overlapsAny reports whether sid overlaps an IPv6 prefix of the lists.
func overlapsAny(sid netip.Prefix, lists ...[]netip.Prefix) bool {
	for _, l := range lists {
		for _, q := range l {
			if q.IsValid() && q.Addr().Is6() && !q.Addr().Is4In6() && q.Overlaps(sid.Masked()) {
				return true
			}
		}
	}
	return false
}
