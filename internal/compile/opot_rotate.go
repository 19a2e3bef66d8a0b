package compile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/srchain/srchain/internal/opot"
	"github.com/srchain/srchain/internal/state"
)

// ErrNoOPoTChain: a rotation names a chain that has no proof of transit.
var ErrNoOPoTChain = errors.New("no opot chain")

// OPoTRotation is one chain's key rotation (docs/opot.md "Rotation").
type OPoTRotation struct {
	Chain   string
	Slot    uint8    // the slot with the new keys, the headend's next
	Headend string   // the headend's node
	Nodes   []string // every member node, by hop
}

// RotateOPoTKeys draws a new profile for the free slot of each chain in
// chains (every OPoT chain when empty) and gives each member node its
// parameters for that slot. The free slot is the one the headend does
// not start packets with: nothing in flight uses it, so every node can
// take its new keys in any order. The headend switches to it later
// (SwitchOPoTSlots), once every node has them. net is changed in place,
// but a node's Secrets slice is replaced, never written into, so a
// shallow copy of the network keeps the old keys. keys nil: crypto/rand.
func RotateOPoTKeys(net *state.Network, chains []string, keys io.Reader) ([]OPoTRotation, error) {
	members, err := opotMembers(net)
	if err != nil {
		return nil, err
	}
	if len(chains) == 0 {
		chains = sortedKeys(members)
	}
	if len(chains) == 0 {
		return nil, fmt.Errorf("rotate opot keys: %w in %s", ErrNoOPoTChain, net.Name)
	}
	nodes := map[string]*state.Node{}
	for i := range net.Nodes {
		nodes[net.Nodes[i].Name] = &net.Nodes[i]
	}
	touched := map[string]bool{}
	var out []OPoTRotation
	for _, name := range chains {
		m := members[name]
		if m == nil {
			return nil, fmt.Errorf("rotate opot keys: chain %q: %w", name, ErrNoOPoTChain)
		}
		if !properHops(m.hops) || m.hops[0].role != state.OPoTHeadend {
			return nil, fmt.Errorf("rotate opot keys: chain %s: members %v are not a proof", name, m.hops)
		}
		head := nodes[m.hops[0].node]
		cur, err := opotHeadendSlot(head, name)
		if err != nil {
			return nil, fmt.Errorf("rotate opot keys: %w", err)
		}
		slot := (cur + 1) % OPoTSlots
		p, err := opot.GenerateFrom(keysOrDefault(keys), len(m.hops))
		if err != nil {
			return nil, fmt.Errorf("rotate opot keys: chain %s: %w", name, err)
		}
		r := OPoTRotation{Chain: name, Slot: slot, Headend: head.Name}
		for j, h := range m.hops {
			n := nodes[h.node]
			params, err := p.Node(j)
			if err != nil {
				return nil, fmt.Errorf("rotate opot keys: chain %s: %w", name, err)
			}
			b, err := params.MarshalBinary()
			if err != nil {
				return nil, fmt.Errorf("rotate opot keys: chain %s: %w", name, err)
			}
			i := secretIndex(n, OPoTSecretName(name, int(m.profile), int(slot)))
			if i < 0 {
				return nil, fmt.Errorf("rotate opot keys: chain %s: node %s has no slot %d secret", name, n.Name, slot)
			}
			n.Secrets = slices.Clone(n.Secrets)
			n.Secrets[i].Value = b
			touched[n.Name] = true
			r.Nodes = append(r.Nodes, n.Name)
		}
		out = append(out, r)
	}
	for _, name := range sortedKeys(touched) {
		if err := nodes[name].Seal(); err != nil {
			return nil, fmt.Errorf("rotate opot keys: %w", err)
		}
	}
	return out, nil
}

// SwitchOPoTSlots makes the headend of every rotation start packets with
// the rotation's slot. As RotateOPoTKeys, it replaces the headend's
// Programs slice and the program's Config rather than writing into them.
func SwitchOPoTSlots(net *state.Network, rs []OPoTRotation) error {
	for _, r := range rs {
		i := slices.IndexFunc(net.Nodes, func(n state.Node) bool { return n.Name == r.Headend })
		if i < 0 {
			return fmt.Errorf("switch opot slot of %s: node %q: %w", r.Chain, r.Headend, ErrUnroutable)
		}
		n := &net.Nodes[i]
		pi, cfg, err := opotConfigOf(n)
		if err != nil {
			return fmt.Errorf("switch opot slot of %s: %w", r.Chain, err)
		}
		ci := slices.IndexFunc(cfg.Chains, func(c state.OPoTChain) bool {
			return c.Name == r.Chain && c.Role == state.OPoTHeadend
		})
		if ci < 0 {
			return fmt.Errorf("switch opot slot of %s: %s is not its headend", r.Chain, n.Name)
		}
		cfg.Chains[ci].Slot = r.Slot
		b, err := json.Marshal(cfg)
		if err != nil {
			return fmt.Errorf("switch opot slot of %s: %w", r.Chain, err)
		}
		n.Programs = slices.Clone(n.Programs)
		n.Programs[pi].Config = b
		if err := n.Seal(); err != nil {
			return fmt.Errorf("switch opot slot of %s: %w", r.Chain, err)
		}
	}
	return nil
}

// opotHeadendSlot is the slot n, chain's headend, starts packets with.
func opotHeadendSlot(n *state.Node, chain string) (uint8, error) {
	_, cfg, err := opotConfigOf(n)
	if err != nil {
		return 0, err
	}
	for _, c := range cfg.Chains {
		if c.Name == chain && c.Role == state.OPoTHeadend {
			if int(c.Slot) >= OPoTSlots {
				return 0, fmt.Errorf("chain %s: headend %s uses slot %d", chain, n.Name, c.Slot)
			}
			return c.Slot, nil
		}
	}
	return 0, fmt.Errorf("chain %s: %s is not its headend", chain, n.Name)
}

// opotConfigOf decodes n's OPoT program: its index and configuration.
func opotConfigOf(n *state.Node) (int, *state.OPoTConfig, error) {
	i := slices.IndexFunc(n.Programs, func(p state.Program) bool { return p.Kind == state.ProgramOPoT })
	if i < 0 {
		return 0, nil, fmt.Errorf("node %s runs no opot program", n.Name)
	}
	var cfg state.OPoTConfig
	if err := json.Unmarshal(n.Programs[i].Config, &cfg); err != nil {
		return 0, nil, fmt.Errorf("decode opot program of %s: %w", n.Name, err)
	}
	return i, &cfg, nil
}
