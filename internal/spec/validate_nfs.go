package spec

import (
	"fmt"
	"net/netip"
	"slices"
)

// NF and SID checks.

// router checks that name is a known router, reporting at path.
func (v *validator) router(path, what, name string) bool {
	n := v.s.Node(name)
	switch {
	case name == "":
		v.add(path, "%s is required", what)
	case n == nil:
		v.add(path, "unknown node %q", name)
	case n.Role != RoleRouter:
		v.add(path, "%s %q is a %s, not a router", what, name, n.Role)
	default:
		return true
	}
	return false
}

func (v *validator) nfs() {
	s := v.s
	names := make([]string, len(s.NFs))
	plan := s.SIDs()
	// SIDs met so far, indexed so that checking each is not a scan of
	// all the others (prefixIndex, validate_chains.go).
	var sids prefixIndex
	checkSID := func(path string, p netip.Prefix, node string) {
		n := s.Node(node)
		if n != nil && n.Locator.IsValid() && !n.Locator.Contains(p.Addr()) {
			v.add(path, "SID %s is not inside locator %s of node %q", p.Addr(), n.Locator, node)
		}
		for _, q := range sids.overlapAll(p) {
			v.add(path, "SID %s/%d collides with SID %s at %s", p.Addr(), p.Bits(), q.p, q.name)
		}
		sids.add(p, path, len(sids.all))
		for _, l := range s.Links {
			for _, e := range l.Endpoints {
				for _, a := range e.Addresses {
					if a.IsValid() && p.Masked().Contains(a.Addr()) {
						v.add(path, "SID %s/%d covers interface address %s of node %q", p.Addr(), p.Bits(), a.Addr(), e.Node)
					}
				}
			}
		}
	}
	for i, nf := range s.NFs {
		p := fmt.Sprintf("nfs[%d]", i)
		names[i] = nf.Name
		v.name(p+".name", "NF", nf.Name, MaxName)
		nodeOK := v.router(p+".node", "NF node", nf.Node)
		if nf.SID.IsValid() {
			if !nf.SID.Is6() || nf.SID.Is4In6() || nf.SID.Zone() != "" {
				v.add(p+".sid", "SID %s is not a plain IPv6 address", nf.SID)
			}
		} else if n := s.Node(nf.Node); nodeOK && !n.Locator.IsValid() {
			v.add(p+".node", "node %q has no locator to allocate the NF's SID from; set one or give sid", nf.Node)
		}
		switch nf.Behavior {
		case BehaviorEnd:
			if nf.Interface != "" {
				v.add(p+".interface", "interface is only used with behavior End.X")
			}
		case BehaviorEndX:
			switch {
			case nf.Interface == "":
				v.add(p+".interface", "behavior End.X needs the interface to cross-connect to")
			case nodeOK && !v.nodeHasIf(nf.Node, nf.Interface):
				v.add(p+".interface", "node %q has no interface %q", nf.Node, nf.Interface)
			case nodeOK:
				if h, ok := s.HopOut(nf.Node, nf.Interface); !ok {
					v.add(p+".interface", "interface %q of node %q is on no valid link", nf.Interface, nf.Node)
				} else if _, ok := s.PeerAddr(h, 6); !ok {
					v.add(p+".interface", "End.X needs an IPv6 next hop, but %q has no IPv6 address on the link from %s", h.To, nf.Interface)
				}
			}
		default:
			v.add(p+".behavior", "behavior must be %q or %q, got %q", BehaviorEnd, BehaviorEndX, nf.Behavior)
		}
		if sid, ok := plan.NF[nf.Name]; ok && names[i] != "" && !slices.Contains(names[:i], nf.Name) {
			path := p
			if nf.SID.IsValid() {
				path = p + ".sid"
			}
			checkSID(path, sid, nf.Node)
		}
	}
	v.unique("NF", names, func(i int) string { return fmt.Sprintf("nfs[%d].name", i) })
	seen := map[string]bool{} // chain names met so far (linear in chains)
	for i, c := range s.Chains {
		first := !seen[c.Name]
		seen[c.Name] = true
		if sid, ok := plan.Egress[c.Name]; ok && c.Mode == ModeEncap && first {
			path := fmt.Sprintf("chains[%d]", i)
			if c.EgressSID.IsValid() {
				path += ".egress_sid"
			}
			checkSID(path, sid, c.Egress)
		}
	}
	for _, path := range sortedKeys(plan.Errors) {
		v.add(path, "%s", plan.Errors[path])
	}
}

func sortedKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
