package spec

import (
	"fmt"
	"slices"
)

// LegacyLinks lists the hops out of a legacy NF node, by its interface
// name (at most two, all to one router when the spec is valid).
func (s *Spec) LegacyLinks(node string) []Hop {
	var hops []Hop
	for i, l := range s.Links {
		if len(l.Endpoints) != 2 {
			continue
		}
		for k, e := range l.Endpoints {
			if e.Node == node {
				o := l.Endpoints[1-k]
				hops = append(hops, Hop{From: node, To: o.Node, FromIf: e.Interface, ToIf: o.Interface, Link: i})
			}
		}
	}
	slices.SortFunc(hops, func(a, b Hop) int {
		if a.FromIf < b.FromIf {
			return -1
		}
		if a.FromIf > b.FromIf {
			return 1
		}
		return 0
	})
	return hops
}

// LegacyReturn is the hop a legacy NF's default routes take (toward
// the proxy's IFACE-IN) and the other hop (toward IFACE-OUT; the same
// with one link). ok is false when the node's links do not say.
func (s *Spec) LegacyReturn(node string) (ret, out Hop, ok bool) {
	n := s.Node(node)
	hops := s.LegacyLinks(node)
	if n == nil || len(hops) == 0 || len(hops) > 2 {
		return Hop{}, Hop{}, false
	}
	if len(hops) == 1 {
		if n.LegacyNF != nil && n.LegacyNF.Return != "" && n.LegacyNF.Return != hops[0].FromIf {
			return Hop{}, Hop{}, false
		}
		return hops[0], hops[0], true
	}
	if n.LegacyNF == nil {
		return Hop{}, Hop{}, false
	}
	for k, h := range hops {
		if h.FromIf == n.LegacyNF.Return {
			return h, hops[1-k], true
		}
	}
	return Hop{}, Hop{}, false
}

// legacyNFs checks the nodes with role legacy-nf: one or two links, all
// to one router, IPv6 on the return link (End.AM hands the NF IPv6
// packets, and every proxy needs the NF's IPv6 next hop), `return`
// naming one of them, the ruleset source and the rate limiters.
func (v *validator) legacyNFs() {
	s := v.s
	for i, n := range s.Nodes {
		if n.Role != RoleLegacyNF {
			continue
		}
		p := fmt.Sprintf("nodes[%d]", i)
		hops := s.LegacyLinks(n.Name)
		routers := map[string]bool{}
		for _, h := range hops {
			if o := s.Node(h.To); o != nil && o.Role != RoleRouter {
				v.add(p, "legacy NF %q is linked to %s %q; its links go to the router of its SR proxy only", n.Name, o.Role, o.Name)
			}
			routers[h.To] = true
		}
		switch {
		case len(hops) == 0:
			v.add(p, "legacy NF %q has no link; it needs one or two links to the router of its SR proxy", n.Name)
		case len(hops) > 2:
			v.add(p, "legacy NF %q has %d links; it has one (in and out on the same wire) or two (IFACE-OUT and IFACE-IN of its proxy)", n.Name, len(hops))
		case len(routers) > 1:
			v.add(p, "legacy NF %q is linked to %d nodes; both of its links go to the router of its SR proxy", n.Name, len(routers))
		}
		var cfg LegacyNF
		if n.LegacyNF != nil {
			cfg = *n.LegacyNF
		}
		lp := p + ".legacy_nf"
		has := func(ifn string) bool { return slices.ContainsFunc(hops, func(h Hop) bool { return h.FromIf == ifn }) }
		switch {
		case cfg.Return != "" && !has(cfg.Return):
			v.add(lp+".return", "legacy NF %q has no link on interface %s", n.Name, Clip(cfg.Return))
		case cfg.Return == "" && len(hops) == 2:
			v.add(lp+".return", "legacy NF %q has two links: return must name the one toward its proxy's IFACE-IN (%s or %s)", n.Name, hops[0].FromIf, hops[1].FromIf)
		}
		if ret, _, ok := s.LegacyReturn(n.Name); ok && len(hops) <= 2 {
			if _, ok := s.PeerAddr(ret, 6); !ok {
				v.add(p, "legacy NF %q: the router has no IPv6 address on the return link (%s); the NF's IPv6 default route needs one", n.Name, ret.FromIf)
			}
			if _, ok := s.PeerAddr(Hop{Link: ret.Link, To: n.Name, ToIf: ret.FromIf}, 6); !ok {
				v.add(p, "legacy NF %q has no IPv6 address on %s; its proxy sends to it by IPv6 next hop", n.Name, ret.FromIf)
			}
		}
		switch {
		case cfg.Ruleset != "" && cfg.RulesetFile != "":
			v.add(lp+".ruleset_file", "give ruleset or ruleset_file, not both")
		case cfg.RulesetFile != "":
			if _, err := s.ReadFile(cfg.RulesetFile); err != nil {
				v.add(lp+".ruleset_file", "ruleset_file: %v", err)
			}
		}
		for k, r := range cfg.Routes {
			rp := fmt.Sprintf("%s.routes[%d]", lp, k)
			if !r.Dst.IsValid() {
				v.add(rp+".dst", "dst is required")
			} else if r.Dst != r.Dst.Masked() {
				v.add(rp+".dst", "dst %s has host bits set (did you mean %s?)", r.Dst, r.Dst.Masked())
			}
			hi := slices.IndexFunc(hops, func(h Hop) bool { return h.FromIf == r.Interface })
			switch {
			case r.Interface == "":
				v.add(rp+".interface", "interface is required")
			case hi < 0:
				v.add(rp+".interface", "legacy NF %q has no link on interface %s", n.Name, Clip(r.Interface))
			case r.Dst.IsValid():
				if _, ok := s.PeerAddr(hops[hi], family(r.Dst.Addr())); !ok {
					v.add(rp+".interface", "the router has no IPv%d address on %s to route %s via", family(r.Dst.Addr()), r.Interface, r.Dst)
				}
			}
		}
		seen := map[string]int{}
		for k, r := range cfg.RateLimit {
			rp := fmt.Sprintf("%s.rate_limit[%d]", lp, k)
			switch {
			case r.Interface == "":
				v.add(rp+".interface", "interface is required")
			case !has(r.Interface):
				v.add(rp+".interface", "legacy NF %q has no link on interface %s", n.Name, Clip(r.Interface))
			default:
				if j, dup := seen[r.Interface]; dup {
					v.add(rp+".interface", "interface %q already has a rate limiter (rate_limit[%d])", r.Interface, j)
				}
				seen[r.Interface] = k
			}
			if r.RateKbit < 1 || r.RateKbit > MaxRateKbit {
				v.add(rp+".rate_kbit", "rate_kbit must be 1..%d, got %d", MaxRateKbit, r.RateKbit)
			}
			if r.BurstBytes < 1600 || r.BurstBytes > MaxBurstBytes {
				v.add(rp+".burst_bytes", "burst_bytes must be 1600..%d (at least one full-size packet), got %d", MaxBurstBytes, r.BurstBytes)
			}
			if r.LatencyMS < 1 || r.LatencyMS > MaxLatencyMS {
				v.add(rp+".latency_ms", "latency_ms must be 1..%d, got %d", MaxLatencyMS, r.LatencyMS)
			}
		}
	}
}
