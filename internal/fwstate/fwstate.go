// Package fwstate counts forwarding state (issue 12, seed 004 Fig. 3):
// how many forwarding entries each node needs for a set of chains with
// source routing (srchain: SRv6, the segment list in the packet) and
// with rule-based chaining (one entry per chain at every hop of its
// path), and generates k-ary fat-tree specs to count them on.
package fwstate

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"

	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
)

// ErrBadSize: a fat tree or chain count out of range.
var ErrBadSize = errors.New("bad size")

// Entries are one node's chaining state, by scheme.
//
// Source routing (what srchain's compiler gives the node): Ingress, the
// SR policies (seg6 encap routes, 5-tuple rules and their tables, eBPF
// ingress chains) of the chains the node is the ingress of; Locators,
// its routes to other routers' locators (topology, whatever the
// chains); SIDs, its local SIDs (NF SIDs and per-chain decapsulation
// SIDs). Routes to link subnets are left out of both schemes: both need
// the same underlay.
//
// Rule-based (seed 004's baseline): one entry per chain at every node
// that forwards the chain's traffic along its path (each appearance of a
// node on the path: a chain that crosses a node twice needs two, told
// apart by the input port), and one at the egress.
type Entries struct {
	Node                    string `json:"node"`
	Role                    string `json:"role"`
	Ingress, Locators, SIDs int
	RuleBased               int `json:"rule_based"`
}

// SourceRouting is the node's total with source routing.
func (e Entries) SourceRouting() int { return e.Ingress + e.Locators + e.SIDs }

// Count returns every node's entries for s compiled as net, sorted by
// node name.
func Count(s *spec.Spec, net *state.Network) ([]Entries, error) {
	locators := map[netip.Prefix]bool{}
	for _, n := range s.Nodes {
		if n.Role == spec.RoleRouter && n.Locator.IsValid() {
			locators[n.Locator.Masked()] = true
		}
	}
	byName := map[string]*Entries{}
	var out []*Entries
	for _, n := range net.Nodes {
		e := &Entries{Node: n.Name, Role: n.Role}
		for _, r := range n.Routes {
			switch {
			case r.Encap != nil:
				e.Ingress++
			case locators[r.Dst.Masked()]:
				e.Locators++
			}
		}
		e.Ingress += len(n.Rules)
		for _, p := range n.Programs {
			if p.Kind == state.ProgramIngress {
				var cfg state.IngressConfig
				if err := json.Unmarshal(p.Config, &cfg); err != nil {
					return nil, fmt.Errorf("count node %s: decode ingress config: %w", n.Name, err)
				}
				e.Ingress += len(cfg.Chains)
			}
		}
		e.SIDs = len(n.SIDs)
		byName[n.Name] = e
		out = append(out, e)
	}
	for i := range s.Chains {
		c := &s.Chains[i]
		hops, err := s.ChainPath(c)
		if err != nil {
			return nil, fmt.Errorf("count chain %s: %w", c.Name, err)
		}
		for _, h := range hops {
			if e := byName[h.From]; e != nil {
				e.RuleBased++
			}
		}
		if e := byName[c.Egress]; e != nil {
			e.RuleBased++
		}
	}
	res := make([]Entries, len(out))
	for i, e := range out {
		res[i] = *e
	}
	slices.SortFunc(res, func(a, b Entries) int { return cmp.Compare(a.Node, b.Node) })
	return res, nil
}

// Summary is the per-node maximum and mean of both schemes over the
// routers (hosts hold no chaining state in either).
type Summary struct {
	Routers          int
	SRMax, RBMax     int
	SRMean, RBMean   float64
	SRTotal, RBTotal int
}

// Summarize sums up the routers of es.
func Summarize(es []Entries) Summary {
	var s Summary
	for _, e := range es {
		if e.Role != spec.RoleRouter {
			continue
		}
		s.Routers++
		sr := e.SourceRouting()
		s.SRTotal += sr
		s.RBTotal += e.RuleBased
		s.SRMax = max(s.SRMax, sr)
		s.RBMax = max(s.RBMax, e.RuleBased)
	}
	if s.Routers > 0 {
		s.SRMean = float64(s.SRTotal) / float64(s.Routers)
		s.RBMean = float64(s.RBTotal) / float64(s.Routers)
	}
	return s
}

// FatTree returns the spec of a k-ary fat tree (Al-Fares et al.): k pods
// of k/2 edge and k/2 aggregation switches, (k/2)^2 core switches, every
// switch a router with a /64 locator, and n chains placed across racks:
// chain i enters at a random edge switch, crosses the NFs of two other
// random racks (one `forward` NF per edge switch) and leaves at a fourth
// rack's edge switch, for a destination prefix of its own. No hosts:
// chaining state does not depend on them. Deterministic for a seed.
func FatTree(k, n int, seed uint64) ([]byte, error) {
	if k < 4 || k%2 != 0 || k > 32 {
		return nil, fmt.Errorf("fat tree: k = %d: want an even number in 4..32: %w", k, ErrBadSize)
	}
	if n < 1 || n > spec.MaxChains {
		return nil, fmt.Errorf("fat tree: %d chains: want 1..%d: %w", n, spec.MaxChains, ErrBadSize)
	}
	h := k / 2
	var b strings.Builder
	fmt.Fprintf(&b, "name: ft%d\nsid_format: {locator_bits: 64, function_bits: 48, args_bits: 16}\nnodes:\n", k)
	var routers, edges []string
	node := func(name string) {
		fmt.Fprintf(&b, "  - {name: %s, role: router, locator: \"fc00:2:%x::/64\"}\n", name, len(routers)+1)
		routers = append(routers, name)
	}
	for p := range k {
		for i := range h {
			node(fmt.Sprintf("e%d-%d", p, i))
			edges = append(edges, fmt.Sprintf("e%d-%d", p, i))
		}
		for i := range h {
			node(fmt.Sprintf("a%d-%d", p, i))
		}
	}
	for i := range h {
		for j := range h {
			node(fmt.Sprintf("c%d-%d", i, j))
		}
	}
	b.WriteString("links:\n")
	port := map[string]int{}
	links := 0
	link := func(x, y string) {
		links++
		fmt.Fprintf(&b, "  - endpoints: [{node: %s, interface: p%d, addresses: [\"fc00:1:%x::1/64\"]}, {node: %s, interface: p%d, addresses: [\"fc00:1:%x::2/64\"]}]\n",
			x, port[x], links, y, port[y], links)
		port[x]++
		port[y]++
	}
	for p := range k {
		for i := range h {
			for j := range h {
				link(fmt.Sprintf("e%d-%d", p, i), fmt.Sprintf("a%d-%d", p, j))
			}
		}
		for i := range h {
			for j := range h {
				link(fmt.Sprintf("a%d-%d", p, i), fmt.Sprintf("c%d-%d", i, j))
			}
		}
	}
	b.WriteString("nfs:\n")
	for _, e := range edges {
		fmt.Fprintf(&b, "  - {name: nf-%s, kind: forward, node: %s}\n", e, e)
	}
	b.WriteString("chains:\n")
	r := rand.New(rand.NewPCG(seed, uint64(k)))
	for i := range n {
		pick := r.Perm(len(edges))[:4] // ingress, two NF racks, egress
		fmt.Fprintf(&b, "  - {name: c%d, ingress: %s, egress: %s, match: {dst: [\"fd00:%x::/64\"]}, nfs: [nf-%s, nf-%s]}\n",
			i, edges[pick[0]], edges[pick[3]], i+1, edges[pick[1]], edges[pick[2]])
	}
	return []byte(b.String()), nil
}
