package compile

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"

	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
)

// bgpASNBase is the first private 4-byte AS number (RFC 6996): router i of
// the spec (in spec order, routers only) gets bgpASNBase + i + 1.
const bgpASNBase = 4200000000

// locators is the set of router locators (masked), the prefixes BGP
// carries under `routing: bgp`.
func (c *compiler) locators() map[netip.Prefix]bool {
	out := map[netip.Prefix]bool{}
	for _, n := range c.s.Nodes {
		if n.Role == spec.RoleRouter && n.Locator.IsValid() {
			out[n.Locator.Masked()] = true
		}
	}
	return out
}

// bgp gives every router of a `routing: bgp` spec its BGP program: one
// eBGP session per link to another router, over the link's IPv6
// addresses (a link without IPv6 on both ends carries none), advertising
// the router's locator. routerRoutes left the locator routes out; the
// link subnets stay static, so the tunnel sources and the sessions
// themselves never depend on BGP.
func (c *compiler) bgp() error {
	if c.s.Routing != spec.RoutingBGP {
		return nil
	}
	asn := map[string]uint32{}
	idx := 0
	for _, n := range c.s.Nodes {
		if n.Role == spec.RoleRouter {
			idx++
			asn[n.Name] = bgpASNBase + uint32(idx)
		}
	}
	peers := map[string][]string{} // routers with a BGP session between them
	cfgs := map[string]*state.BGPConfig{}
	for _, n := range c.s.Nodes {
		if n.Role != spec.RoleRouter {
			continue
		}
		id := asn[n.Name] - bgpASNBase
		cfg := state.BGPConfig{
			ASN: asn[n.Name],
			// 10.255.0.0/16 numbers the routers: only unique, never routed.
			RouterID: netip.AddrFrom4([4]byte{10, 255, byte(id >> 8), byte(id)}),
		}
		if n.Locator.IsValid() {
			cfg.Networks = append(cfg.Networks, n.Locator.Masked())
		}
		for _, h := range c.hopsByIf(n.Name) {
			peer, ok := asn[h.To]
			if !ok {
				continue // hosts and legacy NFs speak no BGP
			}
			addr, ok := c.s.PeerAddr(h, 6)
			if !ok {
				continue
			}
			if _, ok := c.s.PeerAddr(spec.Hop{Link: h.Link, To: h.From, ToIf: h.FromIf}, 6); !ok {
				continue // no local IPv6 address to speak from
			}
			cfg.Neighbors = append(cfg.Neighbors, state.BGPNeighbor{Addr: addr, ASN: peer, Interface: h.FromIf})
			peers[n.Name] = append(peers[n.Name], h.To)
		}
		slices.SortFunc(cfg.Neighbors, func(a, b state.BGPNeighbor) int { return a.Addr.Compare(b.Addr) })
		cfgs[n.Name] = &cfg
	}
	for _, n := range c.s.Nodes {
		cfg := cfgs[n.Name]
		if cfg == nil {
			continue
		}
		// Every router reachable over sessions advertises its locator here.
		seen := map[string]bool{n.Name: true}
		queue := []string{n.Name}
		for len(queue) > 0 {
			cur := queue[0]
			queue = queue[1:]
			for _, p := range peers[cur] {
				if !seen[p] {
					seen[p] = true
					queue = append(queue, p)
					cfg.Expect = append(cfg.Expect, cfgs[p].Networks...)
				}
			}
		}
		slices.SortFunc(cfg.Expect, state.ComparePrefix)
		cfg.Expect = slices.Compact(cfg.Expect)
		b, err := json.Marshal(cfg)
		if err != nil {
			return fmt.Errorf("compile node %s bgp: %w", n.Name, err)
		}
		sn := c.nodes[n.Name]
		sn.Programs = append(sn.Programs, state.Program{Kind: state.ProgramBGP, Config: b})
	}
	return nil
}
