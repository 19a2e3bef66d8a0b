// Package compile turns a validated spec into the desired state of every
// node (internal/state). It is pure: no clock, no randomness, no I/O but
// the files the spec names (a firewall's rules_file), which NF kinds read
// through spec.Spec.ReadFile (bounded, cached, relative to the spec) and
// inline; its output is sorted so that the same spec always gives the
// same bytes (golden-tested in testdata/). NF kinds (internal/kind) add
// their own state; the kinds linked in decide what compiles.
package compile

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"

	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
)

// ErrUnsupported is returned for spec features the compiler cannot express
// yet (for example SR-unaware NFs, which need an SR proxy).
var ErrUnsupported = errors.New("unsupported")

// ErrUnroutable is returned when the topology gives no next hop a SID or
// policy needs (Validate normally catches this first).
var ErrUnroutable = errors.New("unroutable")

// Table numbers.
const (
	// TableMain is the kernel's main table (RT_TABLE_MAIN).
	TableMain = 254
	// ChainTableBase + chain index is the table a 5-tuple classifier's
	// rule points at; it holds only that chain's SR policy. Above 255, so
	// no chain can meet the kernel's reserved tables (252 compat, 253
	// default, 254 main, 255 local); spec.MaxChains bounds the index.
	ChainTableBase = 1000
	// RulePriorityBase + chain index is the priority of its rules; below
	// the main table's 32766 (for every index below spec.MaxChains) so
	// classifiers are tried first.
	RulePriorityBase = 1000
)

// ProgramEnd is the program that serves a node's eBPF SIDs.
const ProgramEnd = state.ProgramEnd

type compiler struct {
	s     *spec.Spec
	sids  spec.SIDPlan
	nodes map[string]*state.Node
	// ingress collects the chains of each node with an eBPF ingress.
	ingress map[string][]state.IngressChain
	// owners maps every routed prefix (link subnets, locators) to the
	// nodes attached to it.
	owners map[netip.Prefix][]string
	// keys is the randomness of OPoT profiles (opot.go).
	keys io.Reader
	// pathletEnds marks the nodes whose pathlet End.DT6 is instantiated.
	pathletEnds map[string]bool
}

// Compile produces the desired state of every node of s. s should have
// passed Validate; Compile still fails rather than panics on bad input.
func Compile(s *spec.Spec) (*state.Network, error) {
	return CompileKeys(s, nil)
}

// CompileKeys is Compile drawing OPoT key material from keys (nil:
// crypto/rand); tests pass a seeded stream to get a fixed output.
func CompileKeys(s *spec.Spec, keys io.Reader) (*state.Network, error) {
	c := &compiler{s: s, sids: s.SIDs(), nodes: map[string]*state.Node{}, owners: s.Subnets(), keys: keysOrDefault(keys),
		pathletEnds: map[string]bool{}}
	for _, n := range s.Nodes {
		c.nodes[n.Name] = &state.Node{Name: n.Name, Role: n.Role}
	}
	net := &state.Network{Version: state.FormatVersion, Name: s.Name, Links: []state.Link{}}
	if err := c.links(net); err != nil {
		return nil, err
	}
	for _, n := range s.Nodes {
		c.sysctls(n)
		c.tunsrc(n)
		if n.InterfacesManaged != nil && !*n.InterfacesManaged {
			c.nodes[n.Name].InterfacesUnmanaged = true
		}
	}
	for _, n := range s.Nodes {
		switch n.Role {
		case spec.RoleRouter:
			c.routerRoutes(n)
		case spec.RoleLegacyNF:
			if err := c.legacyNF(n); err != nil {
				return nil, err
			}
		default:
			c.hostRoutes(n)
		}
	}
	if err := c.nfSIDs(); err != nil {
		return nil, err
	}
	for i := range s.Chains {
		if err := c.chain(i); err != nil {
			return nil, err
		}
	}
	if err := c.opot(); err != nil {
		return nil, err
	}
	if err := c.programs(); err != nil {
		return nil, err
	}
	if err := c.ingressPrograms(); err != nil {
		return nil, err
	}
	if err := c.xdp(); err != nil {
		return nil, err
	}
	c.opotWirePackets()
	if err := c.bgp(); err != nil {
		return nil, err
	}
	for _, n := range s.Nodes {
		sn := c.nodes[n.Name]
		sortNode(sn)
		if err := sn.Seal(); err != nil {
			return nil, fmt.Errorf("compile node %s: %w", n.Name, err)
		}
		net.Nodes = append(net.Nodes, *sn)
	}
	slices.SortFunc(net.Nodes, func(a, b state.Node) int { return cmp.Compare(a.Name, b.Name) })
	return net, nil
}

// links creates the wires and the interfaces with their addresses.
func (c *compiler) links(net *state.Network) error {
	for i, l := range c.s.Links {
		if len(l.Endpoints) != 2 {
			return fmt.Errorf("compile links[%d]: %w: need two endpoints", i, ErrUnroutable)
		}
		a, b := l.Endpoints[0], l.Endpoints[1]
		ea := state.Endpoint{Node: a.Node, Interface: a.Interface}
		eb := state.Endpoint{Node: b.Node, Interface: b.Interface}
		net.Links = append(net.Links, state.Link{A: ea, B: eb, MTU: l.MTU})
		for _, side := range []struct {
			e    spec.Endpoint
			peer state.Endpoint
		}{{a, eb}, {b, ea}} {
			n := c.nodes[side.e.Node]
			if n == nil {
				return fmt.Errorf("compile links[%d]: %w: unknown node %q", i, ErrUnroutable, side.e.Node)
			}
			n.Interfaces = append(n.Interfaces, state.Interface{
				Name: side.e.Interface, MTU: l.MTU, Addrs: slices.Clone(side.e.Addresses), Peer: side.peer,
			})
		}
	}
	return nil
}

// sysctls: forwarding on routers; seg6_enabled on every node, because the
// kernel drops any packet carrying an SRH (even with segments left 0, as
// hosts receive in insert mode) on an interface where it is off
// (net/ipv6/exthdrs.c ipv6_srh_rcv); accept_dad=0 so addresses are usable
// at once in the lab. A node whose interfaces are its operator's
// (interfaces_managed: false) gets only what SRv6 needs: srchain adds no
// address there, so no accept_dad, and no "default" entries, which would
// change interfaces created later, outside the spec; ipv6_srh_rcv takes
// the lower of "all" and the interface's seg6_enabled, so both stay.
func (c *compiler) sysctls(n spec.Node) {
	sn := c.nodes[n.Name]
	add := func(k, v string) { sn.Sysctls = append(sn.Sysctls, state.Sysctl{Key: k, Value: v}) }
	if n.Role == spec.RoleRouter || n.Role == spec.RoleLegacyNF {
		add("net.ipv6.conf.all.forwarding", "1")
		add("net.ipv4.ip_forward", "1")
	}
	host := n.InterfacesManaged != nil && !*n.InterfacesManaged
	// A legacy NF is SR-unaware: it keeps the kernel's default
	// (seg6_enabled=0), so an SRH addressed to it is dropped as by any
	// node that knows nothing of SRv6.
	seg6 := n.Role != spec.RoleLegacyNF
	for _, scope := range []string{"all", "default"} {
		if host && scope == "default" {
			continue
		}
		if !host {
			add("net.ipv6.conf."+scope+".accept_dad", "0")
		}
		if seg6 {
			add("net.ipv6.conf."+scope+".seg6_enabled", "1")
		}
	}
	ifs := ifNames(sn)
	for _, ifn := range ifs {
		if !host {
			add("net.ipv6.conf."+ifn+".accept_dad", "0")
		}
		if seg6 {
			add("net.ipv6.conf."+ifn+".seg6_enabled", "1")
		}
	}
}

// tunsrc is the router's tunnel_source when the spec gives one, else its
// first IPv6 interface address (interfaces by name): routed everywhere by
// the link-prefix routes, and never inside a locator, so it cannot collide
// with a SID. A tunnel_source that is not an interface address goes on lo
// as a /128 (on a host that has it there already, apply adds nothing) and
// is routed to the router like a link subnet, so that ICMP errors about
// encapsulated packets (RFC 8754 section 5.4) reach it.
func (c *compiler) tunsrc(n spec.Node) {
	if n.Role != spec.RoleRouter {
		return
	}
	sn := c.nodes[n.Name]
	if t := n.TunnelSource; t.IsValid() {
		sn.TunSrc = t
		for _, i := range sn.Interfaces {
			for _, p := range i.Addrs {
				if p.Addr() == t {
					return
				}
			}
		}
		p := netip.PrefixFrom(t, 128)
		sn.Loopback = append(sn.Loopback, p)
		if !slices.Contains(c.owners[p], n.Name) {
			c.owners[p] = append(c.owners[p], n.Name)
		}
		return
	}
	ifs := slices.Clone(sn.Interfaces)
	slices.SortFunc(ifs, func(a, b state.Interface) int { return cmp.Compare(a.Name, b.Name) })
	for _, i := range ifs {
		for _, p := range i.Addrs {
			if p.Addr().Is6() {
				sn.TunSrc = p.Addr()
				return
			}
		}
	}
}

// routerRoutes gives a router a route to every prefix it is not attached
// to, via the first hop of its BFS shortest path to the nearest owner
// (ties broken by node name); under `routing: bgp` not to the locators.
func (c *compiler) routerRoutes(n spec.Node) {
	sn := c.nodes[n.Name]
	tree := c.s.ShortestPaths(n.Name)
	var learned map[netip.Prefix]bool
	if c.s.Routing == spec.RoutingBGP {
		learned = c.locators() // BGP carries them (bgp.go)
	}
	for p, owners := range c.owners {
		if slices.Contains(owners, n.Name) || learned[p] {
			continue
		}
		owner, ok := tree.Nearest(owners)
		if !ok {
			continue
		}
		hop, _ := tree.FirstHop(owner)
		via, ok := c.s.PeerAddr(hop, spec.Family(p.Addr()))
		if !ok {
			continue // the link lacks that family; nothing to route over
		}
		sn.Routes = append(sn.Routes, state.Route{Dst: p, Via: via, Dev: hop.FromIf})
	}
}

// hostRoutes gives a host default routes (IPv6 and IPv4) via the router on
// its first interface (by name) that has an address of that family.
func (c *compiler) hostRoutes(n spec.Node) {
	sn := c.nodes[n.Name]
	for _, fam := range []int{6, 4} {
		def := netip.MustParsePrefix("::/0")
		if fam == 4 {
			def = netip.MustParsePrefix("0.0.0.0/0")
		}
		for _, h := range c.hopsByIf(n.Name) {
			peer := c.s.Node(h.To)
			if peer == nil || peer.Role != spec.RoleRouter {
				continue
			}
			if _, ok := c.s.PeerAddr(spec.Hop{Link: h.Link, To: h.From, ToIf: h.FromIf}, fam); !ok {
				continue // the host has no address of that family here
			}
			via, ok := c.s.PeerAddr(h, fam)
			if !ok {
				continue
			}
			sn.Routes = append(sn.Routes, state.Route{Dst: def, Via: via, Dev: h.FromIf})
			break
		}
	}
}

// hopsByIf lists a node's hops sorted by its interface name.
func (c *compiler) hopsByIf(node string) []spec.Hop {
	var hops []spec.Hop
	for i, l := range c.s.Links {
		for k, e := range l.Endpoints {
			if e.Node == node && len(l.Endpoints) == 2 {
				o := l.Endpoints[1-k]
				hops = append(hops, spec.Hop{From: node, To: o.Node, FromIf: e.Interface, ToIf: o.Interface, Link: i})
			}
		}
	}
	slices.SortFunc(hops, func(a, b spec.Hop) int { return cmp.Compare(a.FromIf, b.FromIf) })
	return hops
}

func ifNames(n *state.Node) []string {
	var out []string
	for _, i := range n.Interfaces {
		out = append(out, i.Name)
	}
	slices.Sort(out)
	return out
}
