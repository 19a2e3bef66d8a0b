package spec

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
)

// Limits checked by Validate (docs/spec.md explains each).
const (
	MaxLabName  = 12 // prefixes namespace and interface-pair names
	MaxNodeName = 15
	MaxName     = 32 // NFs, chains, links, probes
	MaxIfName   = 15 // IFNAMSIZ - 1 (include/uapi/linux/if.h)
	MinMTU      = 1280
	MaxMTU      = 65535

	// The encapsulated-packet budget: a chain must carry a 1280-byte
	// inner packet (the IPv6 minimum link MTU, RFC 8200 section 5; used
	// for IPv4 inner packets too) plus its SR overhead on every link of
	// its path. Encap: outer IPv6 40 + SRH 8 + 16 per segment (RFC 8754
	// section 2); insert: SRH only, with one more segment (the original
	// destination becomes the last segment).
	MinInnerPacket = 1280
	IPv6HeaderLen  = 40
	SRHFixedLen    = 8
	SIDLen         = 16
)

var (
	nameRE   = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)
	ifNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)
)

type validator struct {
	s    *Spec
	errs []error
}

func (v *validator) add(path, format string, args ...any) {
	v.errs = append(v.errs, v.s.errorf(path, format, args...))
}

// Validate checks the meaning of a decoded spec and returns every problem
// found, joined; each is a *FieldError (see FieldErrors).
func (s *Spec) Validate() error {
	v := &validator{s: s}
	v.top()
	v.nodes()
	v.links()
	v.nfs()
	v.checkKinds()
	v.chains()
	v.traffic()
	return errors.Join(v.errs...)
}

func (v *validator) name(path, kind, name string, max int) bool {
	switch {
	case name == "":
		v.add(path, "%s name is required", kind)
	case len(name) > max:
		v.add(path, "%s name %q is longer than %d characters", kind, name, max)
	case !nameRE.MatchString(name):
		v.add(path, "%s name %q must be lower-case letters, digits and inner dashes", kind, name)
	default:
		return true
	}
	return false
}

// unique reports duplicate names of one kind, pointing at the later one.
func (v *validator) unique(kind string, names []string, path func(int) string) {
	first := map[string]int{}
	for i, n := range names {
		if n == "" {
			continue
		}
		if j, ok := first[n]; ok {
			v.add(path(i), "duplicate %s %q (first at %s)", kind, n, path(j))
			continue
		}
		first[n] = i
	}
}

func (v *validator) top() {
	s := v.s
	v.name("name", "lab", s.Name, MaxLabName)
	f := s.SIDFormat
	switch {
	case f.LocatorBits < 1 || f.LocatorBits > 127:
		v.add("sid_format.locator_bits", "locator_bits must be 1..127, got %d", f.LocatorBits)
	case f.FunctionBits < 1:
		v.add("sid_format.function_bits", "function_bits must be at least 1, got %d", f.FunctionBits)
	case f.ArgsBits < 0:
		v.add("sid_format.args_bits", "args_bits must not be negative, got %d", f.ArgsBits)
	case f.LocatorBits+f.FunctionBits+f.ArgsBits > 128:
		v.add("sid_format", "locator_bits + function_bits + args_bits = %d exceeds 128", f.LocatorBits+f.FunctionBits+f.ArgsBits)
	}
	if len(s.Nodes) == 0 {
		v.add("nodes", "at least one node is required")
	}
}

func (v *validator) nodes() {
	s := v.s
	names := make([]string, len(s.Nodes))
	for i, n := range s.Nodes {
		p := fmt.Sprintf("nodes[%d]", i)
		names[i] = n.Name
		v.name(p+".name", "node", n.Name, MaxNodeName)
		switch n.Role {
		case RoleRouter:
			if n.Datapath != DatapathKernel && n.Datapath != DatapathEBPF {
				v.add(p+".datapath", "datapath must be %q or %q, got %q", DatapathKernel, DatapathEBPF, n.Datapath)
			}
		case RoleHost:
			if n.Locator.IsValid() {
				v.add(p+".locator", "a host has no locator (only routers own SIDs)")
			}
			if n.Datapath != "" {
				v.add(p+".datapath", "a host has no datapath (only routers run SIDs)")
			}
		case "":
			v.add(p+".role", "role is required (%q or %q)", RoleHost, RoleRouter)
		default:
			v.add(p+".role", "role must be %q or %q, got %q", RoleHost, RoleRouter, n.Role)
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

func (v *validator) ifName(path, name string) {
	switch {
	case name == "":
		v.add(path, "interface is required")
	case len(name) > MaxIfName:
		v.add(path, "interface name %q is longer than %d characters (IFNAMSIZ)", name, MaxIfName)
	case !ifNameRE.MatchString(name) || name == "." || name == "..":
		v.add(path, "interface name %q may hold only letters, digits, '_', '.', '-'", name)
	case name == "lo":
		v.add(path, "interface name \"lo\" is reserved")
	}
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
	type sidRef struct {
		sid  netip.Prefix
		path string
	}
	var sids []sidRef
	checkSID := func(path string, p netip.Prefix, node string) {
		n := s.Node(node)
		if n != nil && n.Locator.IsValid() && !n.Locator.Contains(p.Addr()) {
			v.add(path, "SID %s is not inside locator %s of node %q", p.Addr(), n.Locator, node)
		}
		for _, q := range sids {
			if q.sid.Overlaps(p) {
				v.add(path, "SID %s/%d collides with SID %s at %s", p.Addr(), p.Bits(), q.sid, q.path)
			}
		}
		sids = append(sids, sidRef{p.Masked(), path})
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
		if !Kinds[nf.Kind] {
			v.add(p+".kind", "unknown NF kind %q (known: %s)", nf.Kind, strings.Join(sortedKeys(Kinds), ", "))
		}
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
	for i, c := range s.Chains {
		if sid, ok := plan.Egress[c.Name]; ok && c.Mode == ModeEncap && !slices.ContainsFunc(s.Chains[:i], func(o Chain) bool { return o.Name == c.Name }) {
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

func (v *validator) chains() {
	s := v.s
	names := make([]string, len(s.Chains))
	type steer struct {
		ingress string
		dst     netip.Prefix
	}
	steered := map[steer]string{}
	for i := range s.Chains {
		c := &s.Chains[i]
		p := fmt.Sprintf("chains[%d]", i)
		names[i] = c.Name
		if v.name(p+".name", "chain", c.Name, MaxName) && c.Name == ExpectNone {
			v.add(p+".name", "chain name %q is reserved (traffic expect)", ExpectNone)
		}
		inOK := v.router(p+".ingress", "ingress", c.Ingress)
		egOK := v.router(p+".egress", "egress", c.Egress)
		fam := v.match(p+".match", c)
		nfsOK := true
		for k, name := range c.NFs {
			if s.NF(name) == nil {
				v.add(fmt.Sprintf("%s.nfs[%d]", p, k), "unknown NF %q", name)
				nfsOK = false
			}
		}
		switch c.Mode {
		case ModeEncap:
			switch c.EgressBehavior {
			case EgressDX4:
				if fam == 6 {
					v.add(p+".egress_behavior", "End.DX4 decapsulates IPv4, but the chain matches IPv6")
				}
			case EgressDX6, EgressDT6:
				if fam == 4 {
					v.add(p+".egress_behavior", "%s decapsulates IPv6, but the chain matches IPv4", c.EgressBehavior)
				}
			case "":
				// Only when the family is unknown; match reports that.
			default:
				v.add(p+".egress_behavior", "egress_behavior must be End.DX4, End.DX6 or End.DT6, got %q", c.EgressBehavior)
			}
			if c.EgressSID.IsValid() && (!c.EgressSID.Is6() || c.EgressSID.Is4In6()) {
				v.add(p+".egress_sid", "SID %s is not a plain IPv6 address", c.EgressSID)
			}
			if n := s.Node(c.Egress); egOK && !c.EgressSID.IsValid() && !n.Locator.IsValid() {
				v.add(p+".egress", "egress %q has no locator to allocate the decapsulation SID from", c.Egress)
			}
			if egOK && fam != 0 && c.Match.Dst[0].IsValid() && (c.EgressBehavior == EgressDX4 || c.EgressBehavior == EgressDX6) {
				if _, ok := s.NextHopToward(c.Egress, c.Match.Dst[0], fam); !ok {
					v.add(p+".match.dst[0]", "%s: no IPv%d next hop from egress %q toward it (it must overlap a reachable link subnet)", c.EgressBehavior, fam, c.Egress)
				}
			}
		case ModeInsert:
			if fam == 4 {
				v.add(p+".mode", "insert mode carries IPv6 only (the SRH goes into the original IPv6 header), but the chain matches IPv4")
			}
			if len(c.NFs) == 0 {
				v.add(p+".nfs", "insert mode needs at least one NF")
			}
			if c.EgressBehavior != "" {
				v.add(p+".egress_behavior", "egress_behavior is not used in insert mode")
			}
			if c.EgressSID.IsValid() {
				v.add(p+".egress_sid", "egress_sid is not used in insert mode")
			}
		default:
			v.add(p+".mode", "mode must be %q or %q, got %q", ModeEncap, ModeInsert, c.Mode)
		}
		if inOK && egOK && c.Ingress == c.Egress && c.Mode == ModeEncap {
			// Measured: the kernel does not deliver a packet encapsulated
			// toward the ingress's own decapsulation SID.
			v.add(p+".egress", "egress must differ from the ingress in encap mode")
		}
		if inOK && egOK && nfsOK {
			v.path(p, c)
		}
		if inOK && fam != 0 && !c.Match.HasFiveTuple() {
			for k, d := range c.Match.Dst {
				key := steer{c.Ingress, d.Masked()}
				if prev, ok := steered[key]; ok {
					v.add(fmt.Sprintf("%s.match.dst[%d]", p, k), "%s is already steered at %s by chain %q", d, c.Ingress, prev)
				} else {
					steered[key] = c.Name
				}
			}
		}
	}
	v.unique("chain", names, func(i int) string { return fmt.Sprintf("chains[%d].name", i) })
}

// match checks a classifier and returns its family (0 if unknown).
func (v *validator) match(p string, c *Chain) int {
	m := &c.Match
	if len(m.Dst) == 0 {
		v.add(p+".dst", "at least one destination prefix is required")
		return 0
	}
	fam := c.Family()
	check := func(path string, q netip.Prefix) {
		switch {
		case !q.IsValid():
			v.add(path, "bad prefix")
		case q.Addr().Zone() != "" || q.Addr().Is4In6():
			v.add(path, "prefix %s must be plain IPv4 or IPv6", q)
		case q != q.Masked():
			v.add(path, "prefix %s has host bits set (did you mean %s?)", q, q.Masked())
		case family(q.Addr()) != fam:
			v.add(path, "prefix %s is IPv%d but the chain's first destination is IPv%d; use one family per chain", q, family(q.Addr()), fam)
		}
	}
	for k, q := range m.Dst {
		check(fmt.Sprintf("%s.dst[%d]", p, k), q)
	}
	for k, q := range m.Src {
		check(fmt.Sprintf("%s.src[%d]", p, k), q)
	}
	switch m.Proto {
	case "", ProtoTCP, ProtoUDP, ProtoICMP:
	case ProtoICMPv6:
		if fam == 4 {
			v.add(p+".proto", "icmpv6 does not match IPv4 traffic")
		}
	default:
		v.add(p+".proto", "proto must be tcp, udp, icmp or icmpv6, got %q", m.Proto)
	}
	if m.Proto != ProtoTCP && m.Proto != ProtoUDP {
		if !m.DPort.IsZero() {
			v.add(p+".dport", "ports need proto tcp or udp")
		}
		if !m.SPort.IsZero() {
			v.add(p+".sport", "ports need proto tcp or udp")
		}
	}
	return fam
}

// path checks that the chain's packets can travel ingress -> NFs -> egress
// and that every link on the way can carry the encapsulated packet.
func (v *validator) path(p string, c *Chain) {
	hops, err := v.s.ChainPath(c)
	if err != nil {
		v.add(p, "%v", err)
		return
	}
	need := c.Overhead() + MinInnerPacket
	for _, h := range hops {
		if mtu := v.s.Links[h.Link].MTU; mtu < need {
			v.add(p, "links[%d] (%s-%s) has mtu %d, but the chain needs %d (%d bytes of SR overhead + a %d-byte inner packet)",
				h.Link, h.From, h.To, mtu, need, c.Overhead(), MinInnerPacket)
			return
		}
	}
}

// Overhead is the bytes the chain's SR policy adds to each packet: in
// encap mode an outer IPv6 header and an SRH with the NF SIDs plus the
// egress SID; in insert mode an SRH with the NF SIDs plus the original
// destination (RFC 8754 section 2, RFC 8986 section 5).
func (c *Chain) Overhead() int {
	if c.Mode == ModeInsert {
		return SRHFixedLen + SIDLen*(len(c.NFs)+1)
	}
	return IPv6HeaderLen + SRHFixedLen + SIDLen*(len(c.NFs)+1)
}

func (v *validator) traffic() {
	s := v.s
	names := make([]string, len(s.Traffic))
	for i, t := range s.Traffic {
		p := fmt.Sprintf("traffic[%d]", i)
		names[i] = t.Name
		v.name(p+".name", "probe", t.Name, MaxName)
		switch {
		case t.From == "":
			v.add(p+".from", "from is required")
		case s.Node(t.From) == nil:
			v.add(p+".from", "unknown node %q", t.From)
		}
		if !t.To.IsValid() {
			v.add(p+".to", "to is required")
		} else if t.To.Zone() != "" || t.To.Is4In6() {
			v.add(p+".to", "address %s must be plain IPv4 or IPv6", t.To)
		}
		switch t.Proto {
		case ProtoICMP, ProtoICMPv6:
			if t.DPort != 0 {
				v.add(p+".dport", "ports need proto tcp or udp")
			}
		case ProtoTCP, ProtoUDP:
			if t.DPort < 1 || t.DPort > 65535 {
				v.add(p+".dport", "dport must be 1..65535 for %s, got %d", t.Proto, t.DPort)
			}
		default:
			v.add(p+".proto", "proto must be tcp, udp, icmp or icmpv6, got %q", t.Proto)
		}
		switch {
		case t.Expect == "":
			v.add(p+".expect", "expect is required: a chain name or %q", ExpectNone)
		case t.Expect == ExpectNone:
		case s.Chain(t.Expect) == nil:
			v.add(p+".expect", "unknown chain %q", t.Expect)
		default:
			c := s.Chain(t.Expect)
			if t.To.IsValid() && !slices.ContainsFunc(c.Match.Dst, func(d netip.Prefix) bool { return d.Contains(t.To) }) {
				v.add(p+".to", "%s is not in any destination of chain %q", t.To, c.Name)
			}
			v.probeMatches(p, t, c)
		}
	}
	v.unique("probe", names, func(i int) string { return fmt.Sprintf("traffic[%d].name", i) })
}

// probeMatches reports a probe that expects a chain whose 5-tuple
// classifier it cannot match, so the lab check would fail for a reason
// that has nothing to do with the data plane.
func (v *validator) probeMatches(p string, t Probe, c *Chain) {
	m := c.Match
	norm := func(proto string) string {
		if proto == ProtoICMPv6 {
			return ProtoICMP
		}
		return proto
	}
	if m.Proto != "" && norm(m.Proto) != norm(t.Proto) {
		v.add(p+".proto", "chain %q matches proto %s, the probe sends %s", c.Name, m.Proto, t.Proto)
	}
	if !m.DPort.IsZero() && (t.DPort < int(m.DPort.From) || t.DPort > int(m.DPort.To)) {
		v.add(p+".dport", "chain %q matches dport %d-%d, the probe sends to %d", c.Name, m.DPort.From, m.DPort.To, t.DPort)
	}
	if !m.SPort.IsZero() {
		v.add(p+".expect", "chain %q matches source ports, which a probe cannot choose", c.Name)
	}
}
