package spec

import (
	"fmt"
	"net/netip"
	"strconv"
)

// Node, link, interface and address checks.

func (v *validator) nodes() {
	s := v.s
	names := make([]string, len(s.Nodes))
	for i, n := range s.Nodes {
		p := fmt.Sprintf("nodes[%d]", i)
		names[i] = n.Name
		v.name(p+".name", "node", n.Name, MaxNodeName)
		switch n.Role {
		case RoleRouter:
			if n.Datapath != DatapathKernel && !n.EBPFDatapath() {
				v.add(p+".datapath", "datapath must be %q, %q or %q, got %q", DatapathKernel, DatapathEBPF, DatapathXDP, n.Datapath)
			}
		case RoleHost:
			if n.Locator.IsValid() {
				v.add(p+".locator", "a host has no locator (only routers own SIDs)")
			}
			if n.Datapath != "" {
				v.add(p+".datapath", "a host has no datapath (only routers run SIDs)")
			}
		case RoleLegacyNF:
			if n.Locator.IsValid() {
				v.add(p+".locator", "a legacy NF has no locator (it is SR-unaware; its SR proxy's router owns the SID)")
			}
			if n.Datapath != "" {
				v.add(p+".datapath", "a legacy NF has no datapath (only routers run SIDs)")
			}
		case "":
			v.add(p+".role", "role is required (%q, %q or %q)", RoleHost, RoleRouter, RoleLegacyNF)
		default:
			v.add(p+".role", "role must be %q, %q or %q, got %q", RoleHost, RoleRouter, RoleLegacyNF, n.Role)
		}
		if n.LegacyNF != nil && n.Role != RoleLegacyNF && n.Role != "" {
			v.add(p+".legacy_nf", "legacy_nf configures a node with role %q, not a %s", RoleLegacyNF, n.Role)
		}
		if l := n.Locator; l.IsValid() {
			switch {
			case !l.Addr().Is6() || l.Addr().Is4In6():
				v.add(p+".locator", "locator %s is not an IPv6 prefix", l)
			case l != l.Masked():
				v.add(p+".locator", "locator %s has host bits set (did you mean %s?)", l, l.Masked())
			case l.Bits() != s.SIDFormat.LocatorBits:
				v.add(p+".locator", "locator %s is /%d but sid_format.locator_bits is %d", l, l.Bits(), s.SIDFormat.LocatorBits)
			}
			for j := 0; j < i; j++ {
				if o := s.Nodes[j].Locator; o.IsValid() && o.Overlaps(l) {
					v.add(p+".locator", "locator %s overlaps %s of node %q", l, o, s.Nodes[j].Name)
				}
			}
		}
	}
	v.unique("node", names, func(i int) string { return fmt.Sprintf("nodes[%d].name", i) })
	v.tunnelSources()
}

// tunnelSources checks nodes[].tunnel_source: a router's global IPv6
// unicast address, outside every locator (a SID's address as the outer
// source would be taken for the SID by any node replying to it) and not
// another node's address or tunnel source.
func (v *validator) tunnelSources() {
	s := v.s
	owner := map[netip.Addr]string{}
	for _, l := range s.Links {
		for _, e := range l.Endpoints {
			for _, a := range e.Addresses {
				owner[a.Addr()] = e.Node
			}
		}
	}
	for i, n := range s.Nodes {
		t := n.TunnelSource
		if !t.IsValid() {
			continue
		}
		p := fmt.Sprintf("nodes[%d].tunnel_source", i)
		switch {
		case n.Role != RoleRouter:
			v.add(p, "only a router encapsulates: a %s has no tunnel_source", n.Role)
			continue
		case !t.Is6() || t.Is4In6() || t.Zone() != "":
			v.add(p, "tunnel_source %s is not an IPv6 address", t)
			continue
		case !t.IsGlobalUnicast():
			v.add(p, "tunnel_source %s is not a global unicast address (RFC 4291 section 2.4): replies and ICMP errors must reach it", t)
			continue
		}
		for j, o := range s.Nodes {
			if o.Locator.IsValid() && o.Locator.Contains(t) {
				v.add(p, "tunnel_source %s is inside locator %s of node %q (nodes[%d]): it would be taken for a SID", t, o.Locator, o.Name, j)
			}
			if j < i && o.TunnelSource == t {
				v.add(p, "tunnel_source %s is also node %q's (nodes[%d])", t, o.Name, j)
			}
		}
		if on, ok := owner[t]; ok && on != n.Name {
			v.add(p, "tunnel_source %s is an interface address of node %q", t, on)
		}
	}
}

// addrRef is where an interface address was written.
type addrRef struct {
	path string
	node string
	link int
}

func (v *validator) links() {
	s := v.s
	names := make([]string, len(s.Links))
	ifaces := map[[2]string]string{} // node, interface -> path
	addrs := map[netip.Addr]addrRef{}
	subnets := map[netip.Prefix]addrRef{} // link subnet -> first use
	for i, l := range s.Links {
		p := fmt.Sprintf("links[%d]", i)
		names[i] = l.Name
		if l.Name != "" {
			v.name(p+".name", "link", l.Name, MaxName)
		}
		if l.MTU < MinMTU || l.MTU > MaxMTU {
			v.add(p+".mtu", "mtu must be %d..%d (IPv6 minimum, RFC 8200 section 5), got %d", MinMTU, MaxMTU, l.MTU)
		}
		if len(l.Endpoints) != 2 {
			v.add(p+".endpoints", "a link has exactly two endpoints, got %d", len(l.Endpoints))
		}
		for k, e := range l.Endpoints {
			ep := fmt.Sprintf("%s.endpoints[%d]", p, k)
			switch {
			case e.Node == "":
				v.add(ep+".node", "node is required")
			case s.Node(e.Node) == nil:
				v.add(ep+".node", "unknown node %q", e.Node)
			}
			v.ifName(ep+".interface", e.Interface)
			if e.Node != "" && e.Interface != "" {
				key := [2]string{e.Node, e.Interface}
				if prev, ok := ifaces[key]; ok {
					v.add(ep+".interface", "interface %q of node %q is already used at %s", e.Interface, e.Node, prev)
				} else {
					ifaces[key] = ep + ".interface"
				}
			}
			for m, a := range e.Addresses {
				ap := fmt.Sprintf("%s.addresses[%d]", ep, m)
				if !v.ifAddr(ap, a) {
					continue
				}
				if prev, ok := addrs[a.Addr()]; ok {
					v.add(ap, "duplicate address %s (also at %s)", a.Addr(), prev.path)
				} else {
					addrs[a.Addr()] = addrRef{ap, e.Node, i}
				}
				if prev, ok := subnets[a.Masked()]; ok && prev.link != i {
					v.add(ap, "subnet %s is also used by links[%d]; each link needs its own subnet", a.Masked(), prev.link)
				} else if !ok {
					if q, prev, found := overlapping(subnets, a.Masked(), i); found {
						v.add(ap, "subnet %s overlaps subnet %s of links[%d]; link subnets must not overlap", a.Masked(), q, prev.link)
					}
					subnets[a.Masked()] = addrRef{ap, e.Node, i}
				}
				for ni, n := range s.Nodes {
					if n.Locator.IsValid() && n.Locator.Overlaps(a) {
						v.add(ap, "address %s is inside locator %s of node %q (nodes[%d])", a, n.Locator, n.Name, ni)
					}
				}
			}
		}
		if len(l.Endpoints) == 2 {
			a, b := l.Endpoints[0], l.Endpoints[1]
			if a.Node != "" && a.Node == b.Node {
				v.add(p+".endpoints", "both endpoints are on node %q", a.Node)
			}
			na, nb := s.Node(a.Node), s.Node(b.Node)
			if na != nil && nb != nil && na.Role == RoleRouter && nb.Role == RoleRouter && a.Node != b.Node {
				// Routes and SR paths are computed over links regardless
				// of family: every router-router link must carry IPv6.
				for k, e := range l.Endpoints {
					if _, ok := firstAddr(e.Addresses, 6); !ok {
						v.add(fmt.Sprintf("%s.endpoints[%d].addresses", p, k), "interface %s of router %q has no IPv6 address; a link between two routers needs IPv6 on both ends (SRv6 paths and IPv6 routes cross every router-router link)", e.Interface, e.Node)
					}
				}
			}
			for _, fam := range []int{4, 6} {
				pa, okA := firstPrefix(a.Addresses, fam)
				pb, okB := firstPrefix(b.Addresses, fam)
				if okA && okB && pa.Masked() != pb.Masked() && usable(pa) && usable(pb) {
					v.add(p+".endpoints", "endpoints are in different IPv%d subnets (%s, %s)", fam, pa.Masked(), pb.Masked())
				}
			}
		}
	}
	v.unique("link", names, func(i int) string { return fmt.Sprintf("links[%d].name", i) })
	for i, n := range s.Nodes {
		if n.Role == RoleRouter && !v.hasIPv6(n.Name) && n.Name != "" {
			v.add(fmt.Sprintf("nodes[%d]", i), "router %q has no IPv6 interface address (SRv6 needs one)", n.Name)
		}
	}
}

func (v *validator) hasIPv6(node string) bool {
	for _, l := range v.s.Links {
		for _, e := range l.Endpoints {
			if e.Node == node {
				if _, ok := firstAddr(e.Addresses, 6); ok {
					return true
				}
			}
		}
	}
	return false
}

func firstPrefix(ps []netip.Prefix, fam int) (netip.Prefix, bool) {
	for _, p := range ps {
		if p.IsValid() && family(p.Addr()) == fam {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

// reservedIfNames are names an interface cannot take: lo exists in every
// namespace, and all/default are the sysctl directories
// net.ipv{4,6}.conf.{all,default} that srchain writes for the node.
var reservedIfNames = map[string]string{
	"lo":      "the loopback interface every namespace has",
	"all":     "a sysctl directory (net.ipv6.conf.all)",
	"default": "a sysctl directory (net.ipv6.conf.default)",
}

// ifName checks an interface name against what the kernel accepts
// (dev_valid_name: at most IFNAMSIZ-1 bytes, no '/', ':' or space) and
// what srchain builds from it: sysctl keys net.ipv6.conf.<name>.*, where
// a '.' would split the name (eth1.100 becomes the path eth1/100).
func (v *validator) ifName(path, name string) {
	switch {
	case name == "":
		v.add(path, "interface is required")
	case len(name) > MaxIfName:
		v.add(path, "interface name %s is longer than %d characters (IFNAMSIZ)", Clip(name), MaxIfName)
	case !ifNameRE.MatchString(name):
		v.add(path, "interface name %s may hold only letters, digits, '_' and '-' (no '.', '/' or ':': the name is part of sysctl paths)", Clip(name))
	case reservedIfNames[name] != "":
		v.add(path, "interface name %q is reserved: %s", name, reservedIfNames[name])
	}
}

// maxEcho bounds how much of a user's string an error repeats: a value
// refused for its length must not make an error as long as itself.
const maxEcho = 64

// Clip quotes s for an error message, cut to maxEcho bytes; every
// package that echoes a name from the input uses it.
func Clip(s string) string {
	if len(s) <= maxEcho {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%q... (%d bytes)", s[:maxEcho], len(s))
}

// usable is ifAddr without reporting: whether a is a host address.
func usable(a netip.Prefix) bool {
	ad := a.Addr()
	return a.IsValid() && ad.Zone() == "" && !ad.Is4In6() && !ad.IsUnspecified() && !ad.IsMulticast() &&
		!ad.IsLoopback() && !ad.IsLinkLocalUnicast() && !(a == a.Masked() && a.Bits() < ad.BitLen()-1)
}

// ifAddr checks one interface address; false when unusable.
func (v *validator) ifAddr(path string, a netip.Prefix) bool {
	ad := a.Addr()
	switch {
	case !a.IsValid():
		v.add(path, "bad address")
	case ad.Zone() != "":
		v.add(path, "address %s must not have a zone", a)
	case ad.Is4In6():
		v.add(path, "use the IPv4 form instead of %s", a)
	case ad.IsUnspecified() || ad.IsMulticast() || ad.IsLoopback() || ad.IsLinkLocalUnicast():
		v.add(path, "address %s is not a usable global unicast address", a)
	case a == a.Masked() && a.Bits() < ad.BitLen()-1:
		v.add(path, "address %s is the subnet itself; give a host address", a)
	default:
		return true
	}
	return false
}

// nodeHasIf reports whether node has a link on interface ifname.
func (v *validator) nodeHasIf(node, ifname string) bool {
	for _, l := range v.s.Links {
		for _, e := range l.Endpoints {
			if e.Node == node && e.Interface == ifname {
				return true
			}
		}
	}
	return false
}

// overlapping finds a subnet of another link than link that overlaps q,
// the smallest in address order so that the report is deterministic.
func overlapping(subnets map[netip.Prefix]addrRef, q netip.Prefix, link int) (netip.Prefix, addrRef, bool) {
	var best netip.Prefix
	for o, r := range subnets {
		if r.link != link && o.Overlaps(q) && (!best.IsValid() || o.Addr().Less(best.Addr()) || (o.Addr() == best.Addr() && o.Bits() < best.Bits())) {
			best = o
		}
	}
	if !best.IsValid() {
		return netip.Prefix{}, addrRef{}, false
	}
	return best, subnets[best], true
}
