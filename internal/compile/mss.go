package compile

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
)

// Fixed header sizes the MSS leaves out (RFC 9293 3.7.1, RFC 6691: the
// MSS counts the TCP payload only, options are the sender's to subtract).
const (
	ipv4Header = 20
	ipv6Header = 40
	tcpHeader  = 20
)

// MSSFor is the largest MSS whose segments fit chain ch's path with its
// SR overhead: the smallest MTU of the links from the ingress through
// every NF to the egress (and on to the destination in insert mode,
// where the SRH stays in the packet), less ch.Overhead(), the inner IP
// header and the TCP header. ok is false for a chain no TCP takes.
func MSSFor(s *spec.Spec, ch *spec.Chain) (int, bool, error) {
	if ch.Match.Proto != "" && ch.Match.Proto != spec.ProtoTCP {
		return 0, false, nil
	}
	hops, err := s.ChainPath(ch)
	if err != nil {
		return 0, false, err
	}
	mtu := spec.MaxMTU
	for _, h := range hops {
		mtu = min(mtu, s.Links[h.Link].MTU)
	}
	if ch.Mode == spec.ModeInsert {
		for _, l := range s.Links {
			mtu = min(mtu, l.MTU) // the rest of the way is the network's: take its smallest link
		}
	}
	inner := ipv6Header
	if ch.Family() == 4 {
		inner = ipv4Header
	}
	return mtu - ch.Overhead() - inner - tcpHeader, true, nil
}

// mssClamps gives the ingress and the egress router of every chain TCP
// may take the node's MSS clamp (internal/mss): SYNs of the chain's
// flows, both ways, leave those routers with an MSS that fits the chain.
func (c *compiler) mssClamps() error {
	clamps := map[string][]state.MSSClamp{}
	for i := range c.s.Chains {
		ch := &c.s.Chains[i]
		m, ok, err := MSSFor(c.s, ch)
		if err != nil {
			return fmt.Errorf("compile chain %s mss: %w", ch.Name, err)
		}
		if !ok {
			continue
		}
		cl := state.MSSClamp{Chain: ch.Name, Dst: slices.Clone(ch.Match.Dst), Src: slices.Clone(ch.Match.Src),
			SPort: state.PortRange(ch.Match.SPort), DPort: state.PortRange(ch.Match.DPort), MSS: m}
		for _, n := range []string{ch.Ingress, ch.Egress} {
			if len(clamps[n]) > 0 && clamps[n][len(clamps[n])-1].Chain == ch.Name {
				continue // ingress = egress
			}
			clamps[n] = append(clamps[n], cl)
		}
	}
	for _, n := range c.s.Nodes {
		cs := clamps[n.Name]
		if len(cs) == 0 {
			continue
		}
		b, err := json.Marshal(state.MSSConfig{Clamps: cs})
		if err != nil {
			return fmt.Errorf("compile node %s mss: %w", n.Name, err)
		}
		sn := c.nodes[n.Name]
		sn.Programs = append(sn.Programs, state.Program{Kind: state.ProgramMSS, Config: b})
	}
	return nil
}
