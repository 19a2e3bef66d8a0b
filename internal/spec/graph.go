package spec

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
)

// Hop is one link traversal from node From (out of FromIf) to node To (in
// ToIf) over links[Link].
type Hop struct {
	From, To     string
	FromIf, ToIf string
	Link         int
}

// neighbors lists the hops out of each node, sorted by neighbor name then
// link index so that shortest-path ties are broken by name. Links with
// fewer or more than two endpoints are ignored (Validate reports them).
func (s *Spec) neighbors() map[string][]Hop {
	known := make(map[string]bool, len(s.Nodes))
	for _, n := range s.Nodes {
		known[n.Name] = true
	}
	adj := map[string][]Hop{}
	for i, l := range s.Links {
		if len(l.Endpoints) != 2 {
			continue
		}
		a, b := l.Endpoints[0], l.Endpoints[1]
		if !known[a.Node] || !known[b.Node] || a.Node == b.Node {
			continue
		}
		adj[a.Node] = append(adj[a.Node], Hop{From: a.Node, To: b.Node, FromIf: a.Interface, ToIf: b.Interface, Link: i})
		adj[b.Node] = append(adj[b.Node], Hop{From: b.Node, To: a.Node, FromIf: b.Interface, ToIf: a.Interface, Link: i})
	}
	for _, hops := range adj {
		sort.SliceStable(hops, func(i, j int) bool {
			if hops[i].To != hops[j].To {
				return hops[i].To < hops[j].To
			}
			return hops[i].Link < hops[j].Link
		})
	}
	return adj
}

// Tree is a breadth-first shortest-path tree rooted at one node. Only
// routers forward, so hosts are leaves (except the root itself).
type Tree struct {
	Root string
	// In is the hop that first reached each node (absent for the root and
	// for unreachable nodes).
	In   map[string]Hop
	Dist map[string]int
	// routers is the set of router names (hosts are the other nodes).
	routers map[string]bool
}

// ShortestPaths returns the BFS tree from root. Trees are computed once
// per root and kept with the spec (callers only read them); a change of
// the number of nodes or links drops them. A spec is not edited in place
// once it is being validated or compiled, and is not shared between
// goroutines.
func (s *Spec) ShortestPaths(root string) *Tree {
	shape := [2]int{len(s.Nodes), len(s.Links)}
	if s.paths == nil || s.pathsShape != shape {
		s.paths, s.pathsShape = map[string]*Tree{}, shape
	}
	if t, ok := s.paths[root]; ok {
		return t
	}
	t := s.shortestPaths(root)
	s.paths[root] = t
	return t
}

func (s *Spec) shortestPaths(root string) *Tree {
	adj := s.neighbors()
	router := make(map[string]bool, len(s.Nodes))
	for _, n := range s.Nodes {
		if n.Role == RoleRouter {
			router[n.Name] = true
		}
	}
	t := &Tree{Root: root, In: map[string]Hop{}, Dist: map[string]int{root: 0}, routers: router}
	queue := []string{root}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur != root && !router[cur] {
			continue
		}
		for _, h := range adj[cur] {
			if _, seen := t.Dist[h.To]; seen {
				continue
			}
			t.Dist[h.To] = t.Dist[cur] + 1
			t.In[h.To] = h
			queue = append(queue, h.To)
		}
	}
	return t
}

// Path returns the hops from the root to node to, or false if unreachable.
func (t *Tree) Path(to string) ([]Hop, bool) {
	if _, ok := t.Dist[to]; !ok {
		return nil, false
	}
	var rev []Hop
	for cur := to; cur != t.Root; {
		h := t.In[cur]
		rev = append(rev, h)
		cur = h.From
	}
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	return rev, true
}

// FirstHop is the first hop from the root toward node to.
func (t *Tree) FirstHop(to string) (Hop, bool) {
	p, ok := t.Path(to)
	if !ok || len(p) == 0 {
		return Hop{}, false
	}
	return p[0], true
}

// ChainPath is the path a chain's packets take: ingress, each NF node in
// order (an End.X NF leaves through its interface), then the egress.
// It fails naming the first leg that has no path.
func (s *Spec) ChainPath(c *Chain) ([]Hop, error) {
	var path []Hop
	cur := c.Ingress
	leg := func(to string) error {
		p, ok := s.ShortestPaths(cur).Path(to)
		if !ok {
			return fmt.Errorf("no path from %s to %s", cur, to)
		}
		path = append(path, p...)
		cur = to
		return nil
	}
	for _, name := range c.NFs {
		nf := s.NF(name)
		if nf == nil {
			return nil, fmt.Errorf("unknown NF %q", name)
		}
		if err := leg(nf.Node); err != nil {
			return nil, err
		}
		if nf.Behavior == BehaviorEndX {
			h, ok := s.HopOut(nf.Node, nf.Interface)
			if !ok {
				return nil, fmt.Errorf("node %s has no link on %q", nf.Node, nf.Interface)
			}
			if n := s.Node(h.To); n == nil || n.Role != RoleRouter {
				return nil, fmt.Errorf("End.X of NF %q leads to %s, which is not a router and cannot forward", nf.Name, h.To)
			}
			path = append(path, h)
			cur = h.To
		}
	}
	if err := leg(c.Egress); err != nil {
		return nil, err
	}
	return path, nil
}

// HopOut is the hop leaving node through interface ifname.
func (s *Spec) HopOut(node, ifname string) (Hop, bool) {
	for _, h := range s.neighbors()[node] {
		if h.FromIf == ifname {
			return h, true
		}
	}
	return Hop{}, false
}

// endpoint returns the endpoint of links[link] that is node's ifname.
func (s *Spec) endpoint(link int, node, ifname string) *Endpoint {
	for i := range s.Links[link].Endpoints {
		e := &s.Links[link].Endpoints[i]
		if e.Node == node && e.Interface == ifname {
			return e
		}
	}
	return nil
}

// PeerAddr is the address of family fam (4 or 6) that the far end of hop h
// has on the link: the next hop for routes sent over h.
func (s *Spec) PeerAddr(h Hop, fam int) (netip.Addr, bool) {
	e := s.endpoint(h.Link, h.To, h.ToIf)
	if e == nil {
		return netip.Addr{}, false
	}
	return firstAddr(e.Addresses, fam)
}

func firstAddr(ps []netip.Prefix, fam int) (netip.Addr, bool) {
	for _, p := range ps {
		if p.IsValid() && family(p.Addr()) == fam {
			return p.Addr(), true
		}
	}
	return netip.Addr{}, false
}

func family(a netip.Addr) int {
	if a.Is4() {
		return 4
	}
	return 6
}

// Family is 4 or 6 for an address.
func Family(a netip.Addr) int { return family(a) }

// Subnets maps every routed prefix (link subnets, router locators) to the
// nodes attached to it, in file order.
func (s *Spec) Subnets() map[netip.Prefix][]string {
	owners := map[netip.Prefix][]string{}
	own := func(p netip.Prefix, node string) {
		for _, o := range owners[p] {
			if o == node {
				return
			}
		}
		owners[p] = append(owners[p], node)
	}
	for _, l := range s.Links {
		if len(l.Endpoints) != 2 {
			continue
		}
		for _, e := range l.Endpoints {
			for _, p := range e.Addresses {
				if p.IsValid() {
					own(p.Masked(), e.Node)
				}
			}
		}
	}
	for _, n := range s.Nodes {
		if n.Role == RoleRouter && n.Locator.IsValid() {
			own(n.Locator.Masked(), n.Name)
		}
	}
	return owners
}

// Nearest picks the owner closest to the tree's root (excluding the root),
// ties broken by name. A subnet is reached through a router attached to
// it, because a host (even one with another link into the subnet) does not
// forward; a host is picked only when the root itself is attached to the
// subnet, so the host is its neighbor there.
func (t *Tree) Nearest(owners []string) (string, bool) {
	kinds := []bool{true}
	if slices.Contains(owners, t.Root) {
		kinds = append(kinds, false)
	}
	for _, wantRouter := range kinds {
		best, bestDist := "", -1
		for _, o := range owners {
			d, ok := t.Dist[o]
			if !ok || o == t.Root || t.routers[o] != wantRouter {
				continue
			}
			if bestDist < 0 || d < bestDist || (d == bestDist && o < best) {
				best, bestDist = o, d
			}
		}
		if bestDist >= 0 {
			return best, true
		}
	}
	return "", false
}

// NextHopToward is the family-fam address of node's neighbor on the
// shortest path toward the most specific subnet overlapping dst: the
// next hop End.DX4 / End.DX6 cross-connect to.
func (s *Spec) NextHopToward(node string, dst netip.Prefix, fam int) (netip.Addr, bool) {
	owners := s.Subnets()
	var cands []netip.Prefix
	for p := range owners {
		if p.Overlaps(dst) && family(p.Addr()) == fam {
			cands = append(cands, p)
		}
	}
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].Bits() != cands[j].Bits() {
			return cands[i].Bits() > cands[j].Bits()
		}
		return cands[i].Addr().Less(cands[j].Addr())
	})
	tree := s.ShortestPaths(node)
	for _, p := range cands {
		owner, ok := tree.Nearest(owners[p])
		if !ok {
			continue
		}
		hop, _ := tree.FirstHop(owner)
		if nh, ok := s.PeerAddr(hop, fam); ok {
			return nh, true
		}
	}
	return netip.Addr{}, false
}

// pathToward is the path from node to the nearest node attached to the
// most specific subnet overlapping dst (nil if there is none).
func (s *Spec) pathToward(node string, dst netip.Prefix) []Hop {
	owners := s.Subnets()
	var best netip.Prefix
	for p := range owners {
		if p.Overlaps(dst) && family(p.Addr()) == family(dst.Addr()) &&
			(!best.IsValid() || p.Bits() > best.Bits() || (p.Bits() == best.Bits() && p.Addr().Less(best.Addr()))) {
			best = p
		}
	}
	if !best.IsValid() {
		return nil
	}
	tree := s.ShortestPaths(node)
	owner, ok := tree.Nearest(owners[best])
	if !ok {
		return nil
	}
	path, _ := tree.Path(owner)
	return path
}
