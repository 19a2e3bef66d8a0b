package compile

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"

	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
)

// ProgramIngress is the eBPF ingress program (internal/ingress).
const ProgramIngress = state.ProgramIngress

// ebpfIngress reports whether node steers its chains with srchain's eBPF
// ingress (`ingress: ebpf`), in front of the kernel's policy routing.
func (c *compiler) ebpfIngress(node string) bool {
	n := c.s.Node(node)
	return n != nil && n.Ingress == spec.IngressEBPF
}

// ingressChain records chain ch (compiled: travel-order segments, mode,
// the policy route's device) for its node's ingress program.
func (c *compiler) ingressChain(ch *spec.Chain, mode state.EncapMode, segs []netip.Addr, dev string) error {
	proto, err := ProtoNumber(ch.Match.Proto, ch.Family())
	if err != nil {
		return err
	}
	if c.ingress == nil {
		c.ingress = map[string][]state.IngressChain{}
	}
	ic := state.IngressChain{
		Name: ch.Name, Mode: mode, Segments: slices.Clone(segs), Dev: dev,
		Dst: slices.Clone(ch.Match.Dst), Src: slices.Clone(ch.Match.Src), Proto: proto,
		SPort: state.PortRange(ch.Match.SPort), DPort: state.PortRange(ch.Match.DPort),
	}
	if ch.OPoT {
		ic.Ext = state.IngressExtOPoT
	}
	if pool := c.s.Pool(ch.Pool); pool != nil {
		// Per-flow setup: one segment list per instance, the pool's
		// place taken by the instance's SID.
		if ch.PoolAt < 0 || ch.PoolAt >= len(segs) {
			return fmt.Errorf("%w: pool %s at %d", ErrUnroutable, pool.Name, ch.PoolAt)
		}
		ip := &state.IngressPool{Name: pool.Name, Pick: pool.Pick, NFs: slices.Clone(pool.NFs)}
		for _, name := range pool.NFs {
			p, ok := c.sids.NF[name]
			if !ok {
				return fmt.Errorf("%w: pool %s: NF %q has no SID", ErrUnroutable, pool.Name, name)
			}
			seg := p.Addr()
			if arg, ok := ch.Args[name]; ok {
				seg = c.s.SIDFormat.WithArgs(seg, arg)
			}
			v := slices.Clone(segs)
			v[ch.PoolAt] = seg
			ip.Variants = append(ip.Variants, v)
		}
		ic.Pool = ip
	}
	c.ingress[ch.Ingress] = append(c.ingress[ch.Ingress], ic)
	return nil
}

// ingressPrograms adds the ingress program, on every interface, to each
// node with `ingress: ebpf` that is the ingress of some chain. Chains
// stay in spec order (the classifier derives the kernel's order from it).
func (c *compiler) ingressPrograms() error {
	for _, n := range c.s.Nodes {
		chains := c.ingress[n.Name]
		if !c.ebpfIngress(n.Name) || len(chains) == 0 {
			continue
		}
		sn := c.nodes[n.Name]
		cfg, err := json.Marshal(state.IngressConfig{Chains: chains})
		if err != nil {
			return fmt.Errorf("compile node %s ingress: %w", n.Name, err)
		}
		sn.Programs = append(sn.Programs, state.Program{Kind: ProgramIngress, Interfaces: ifNames(sn), Config: cfg})
	}
	return nil
}
