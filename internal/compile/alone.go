package compile

import (
	"fmt"

	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
)

// ChainParts compiles chain i of s alone: what it adds to each node, as
// the parts state.Split takes out of Compile's nodes (the same items in
// the same order). plan must be s.SIDs(). The chain must pass
// spec.ChainAlone (spec.ErrNotAlone otherwise: the caller compiles the
// whole spec).
func ChainParts(s *spec.Spec, plan spec.SIDPlan, i int) (map[string]*state.Part, error) {
	if i < 0 || i >= len(s.Chains) {
		return nil, fmt.Errorf("compile chain %d of %d: %w", i, len(s.Chains), spec.ErrNotAlone)
	}
	ch := &s.Chains[i]
	if err := s.ChainAlone(ch); err != nil {
		return nil, err
	}
	c := &compiler{s: s, sids: plan, nodes: map[string]*state.Node{}, pathletEnds: map[string]bool{}}
	for _, n := range s.Nodes {
		c.nodes[n.Name] = &state.Node{Name: n.Name, Role: n.Role}
	}
	if err := c.links(&state.Network{}); err != nil {
		return nil, err
	}
	if err := c.chain(i); err != nil {
		return nil, err
	}
	out := map[string]*state.Part{}
	for name, n := range c.nodes {
		state.SortItems(n)
		base, parts := state.Split(*n)
		if len(base.Routes)+len(base.Rules)+len(base.SIDs) > 0 || len(parts) > 1 || (len(parts) == 1 && parts[ch.Name] == nil) {
			return nil, fmt.Errorf("compile chain %s alone: node %s got items of other chains: %w", ch.Name, name, spec.ErrNotAlone)
		}
		p := parts[ch.Name]
		if p == nil {
			continue
		}
		out[name] = p
	}
	return out, nil
}
