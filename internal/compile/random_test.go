package compile

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
)

// randomSpec builds a random topology: routers in a random connected-ish
// graph, hosts hanging off routers, NFs on random routers, chains between
// random routers. Some results are invalid (that is fine: the test only
// looks at the ones Validate accepts).
func randomSpec(r *rand.Rand) *spec.Spec {
	s := &spec.Spec{Name: "rnd", SIDFormat: spec.SIDFormat{LocatorBits: 64, FunctionBits: 48, ArgsBits: 16}}
	nr := 2 + r.IntN(7)
	for i := 0; i < nr; i++ {
		dp := spec.DatapathKernel
		if r.IntN(4) == 0 {
			dp = spec.DatapathEBPF
		}
		s.Nodes = append(s.Nodes, spec.Node{Name: fmt.Sprintf("r%d", i), Role: spec.RoleRouter, Datapath: dp,
			Locator: netip.MustParsePrefix(fmt.Sprintf("fd00:%x::/64", i+1))})
	}
	ifc := map[string]int{}
	link := func(a, b string) {
		n := len(s.Links) + 1
		ia, ib := ifc[a], ifc[b]
		ifc[a]++
		ifc[b]++
		s.Links = append(s.Links, spec.Link{MTU: 1500, Endpoints: []spec.Endpoint{
			{Node: a, Interface: fmt.Sprintf("eth%d", ia), Addresses: []netip.Prefix{
				netip.MustParsePrefix(fmt.Sprintf("fc00:%x::1/64", n)), netip.MustParsePrefix(fmt.Sprintf("10.%d.%d.1/24", n/256, n%256))}},
			{Node: b, Interface: fmt.Sprintf("eth%d", ib), Addresses: []netip.Prefix{
				netip.MustParsePrefix(fmt.Sprintf("fc00:%x::2/64", n)), netip.MustParsePrefix(fmt.Sprintf("10.%d.%d.2/24", n/256, n%256))}},
		}})
	}
	// A random spanning tree (usually) plus extra edges.
	for i := 1; i < nr; i++ {
		if r.IntN(10) > 0 {
			link(fmt.Sprintf("r%d", r.IntN(i)), fmt.Sprintf("r%d", i))
		}
	}
	for k := r.IntN(nr); k > 0; k-- {
		a, b := r.IntN(nr), r.IntN(nr)
		if a != b {
			link(fmt.Sprintf("r%d", a), fmt.Sprintf("r%d", b))
		}
	}
	nh := 1 + r.IntN(3)
	for i := 0; i < nh; i++ {
		h := fmt.Sprintf("h%d", i)
		s.Nodes = append(s.Nodes, spec.Node{Name: h, Role: spec.RoleHost})
		link(h, fmt.Sprintf("r%d", r.IntN(nr)))
		if r.IntN(3) == 0 { // multihomed: must never become a transit
			link(h, fmt.Sprintf("r%d", r.IntN(nr)))
		}
	}
	for i := r.IntN(4); i > 0; i-- {
		nf := spec.NF{Name: fmt.Sprintf("nf%d", len(s.NFs)), Kind: "forward", Node: fmt.Sprintf("r%d", r.IntN(nr)), Behavior: spec.BehaviorEnd}
		if r.IntN(3) == 0 && ifc[nf.Node] > 0 {
			nf.Behavior, nf.Interface = spec.BehaviorEndX, fmt.Sprintf("eth%d", r.IntN(ifc[nf.Node]))
		}
		s.NFs = append(s.NFs, nf)
	}
	for i := r.IntN(4); i > 0; i-- {
		c := spec.Chain{Name: fmt.Sprintf("c%d", len(s.Chains)), Ingress: fmt.Sprintf("r%d", r.IntN(nr)), Egress: fmt.Sprintf("r%d", r.IntN(nr)), Mode: spec.ModeEncap}
		for _, nf := range s.NFs {
			if r.IntN(2) == 0 {
				c.NFs = append(c.NFs, nf.Name)
			}
		}
		// Destination: a random host's link subnet.
		var hostLinks []spec.Link
		for _, l := range s.Links {
			if l.Endpoints[0].Node[0] == 'h' {
				hostLinks = append(hostLinks, l)
			}
		}
		hl := hostLinks[r.IntN(len(hostLinks))]
		fam := 4 + 2*r.IntN(2)
		for _, a := range hl.Endpoints[0].Addresses {
			if spec.Family(a.Addr()) == fam {
				c.Match.Dst = []netip.Prefix{a.Masked()}
			}
		}
		switch {
		case fam == 6 && r.IntN(3) == 0 && len(c.NFs) > 0:
			c.Mode = spec.ModeInsert
		case fam == 6 && r.IntN(2) == 0:
			c.EgressBehavior = spec.EgressDX6
		case fam == 6:
			c.EgressBehavior = spec.EgressDT6
		default:
			c.EgressBehavior = spec.EgressDX4
		}
		if r.IntN(3) == 0 {
			c.Match.Proto, c.Match.DPort = spec.ProtoUDP, spec.PortRange{From: 53, To: 53}
		}
		s.Chains = append(s.Chains, c)
	}
	return s
}

// TestRandomSpecs: every random spec that validates compiles, and its
// routes deliver: from every node, following plain routes (or a host's
// default route) hop by hop reaches a node attached to each subnet and
// locator without loops.
func TestRandomSpecs(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	valid := 0
	for i := 0; i < 400; i++ {
		s := randomSpec(r)
		if s.Validate() != nil {
			continue
		}
		valid++
		net, err := Compile(s)
		if err != nil {
			if !errors.Is(err, ErrUnsupported) {
				t.Fatalf("spec %d validates but does not compile: %v", i, err)
			}
			continue
		}
		checkDelivery(t, s, net)
	}
	t.Logf("%d of 400 random specs valid", valid)
	if valid < 50 {
		t.Errorf("only %d of 400 random specs were valid; the generator needs work", valid)
	}
}

func checkDelivery(t *testing.T, s *spec.Spec, net *state.Network) {
	t.Helper()
	nodes := map[string]*state.Node{}
	owner := map[netip.Addr]string{}
	for i := range net.Nodes {
		n := &net.Nodes[i]
		nodes[n.Name] = n
		for _, ifc := range n.Interfaces {
			for _, a := range ifc.Addrs {
				owner[a.Addr()] = n.Name
			}
		}
	}
	for p, owners := range s.Subnets() {
		for _, start := range net.Nodes {
			if slices.Contains(owners, start.Name) {
				continue // attached
			}
			from := start.Name
			if start.Role == spec.RoleHost {
				// A host sends everything to its gateway; what that
				// router cannot reach is unreachable for the host.
				via, _, ok := lookup(&start, p)
				if !ok {
					continue // no default route of that family
				}
				from = owner[via]
				if slices.Contains(owners, from) {
					continue
				}
			}
			if _, ok := s.ShortestPaths(from).Nearest(owners); !ok {
				continue // unreachable through routers
			}
			cur, seen := start.Name, map[string]bool{}
			for !slices.Contains(owners, cur) {
				if seen[cur] {
					t.Fatalf("routing loop toward %s from %s at %s", p, start.Name, cur)
				}
				seen[cur] = true
				via, policy, ok := lookup(nodes[cur], p)
				if !ok {
					t.Fatalf("%s has no route toward %s (from %s)", cur, p, start.Name)
				}
				if policy {
					break // steered into a chain; chains are checked in the lab
				}
				cur = owner[via]
			}
			// Reaching a host attached to p counts only if no router is
			// attached to p: a host delivers its own addresses, never the
			// rest of the subnet.
			if nodes[cur].Role == spec.RoleHost && slices.ContainsFunc(owners, func(o string) bool { return nodes[o].Role == spec.RoleRouter }) {
				t.Fatalf("route toward %s from %s ends at host %s instead of a router on the subnet", p, start.Name, cur)
			}
		}
	}
}

// lookup finds the main-table route a node uses toward p (longest prefix
// containing p's address): its next hop, or policy true for an SR policy.
func lookup(n *state.Node, p netip.Prefix) (via netip.Addr, policy, ok bool) {
	best := -1
	for _, r := range n.Routes {
		if r.Table != 0 || !r.Dst.Contains(p.Addr()) || r.Dst.Bits() <= best {
			continue
		}
		best, via, policy = r.Dst.Bits(), r.Via, r.Encap != nil
	}
	return via, policy, best >= 0
}
