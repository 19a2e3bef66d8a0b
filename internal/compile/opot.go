package compile

import (
	cryptorand "crypto/rand"
	"fmt"
	"io"

	"github.com/srchain/srchain/internal/opot"
	"github.com/srchain/srchain/internal/state"
)

// OPoTSlots is how many profiles a chain has at once: slot 0 is the one
// the headend starts with, slot 1 the next key, so that a rotation only
// switches the headend's slot while packets of the old one are still in
// flight (docs/opot.md "Profiles").
const OPoTSlots = 2

// OPoTSecretName names the secret holding one node's parameters of one
// slot of a chain's profile. id is the chain's profile number, the BPF
// maps' key (chain index + 1, so 0 never names a chain).
func OPoTSecretName(chain string, id, slot int) string {
	return fmt.Sprintf("opot/%s/%d/slot%d", chain, id, slot)
}

// opot generates the profiles of every chain with opot: true (seed 003
// III-A; docs/opot.md): k = headend + NF nodes + verifier, one profile
// per slot, and gives each node only its own parameters (NodeParams,
// binary), so no node holds another's share or a mask it does not use.
// Validate has made the nodes distinct. The randomness comes from
// c.keys (crypto/rand in Compile): a compile with OPoT is not
// deterministic, and its digests change with every run.
func (c *compiler) opot() error {
	for i := range c.s.Chains {
		ch := &c.s.Chains[i]
		if !ch.OPoT {
			continue
		}
		where := fmt.Sprintf("compile chains[%d] %s: opot", i, ch.Name)
		type member struct{ node, nf string }
		members := []member{{node: ch.Ingress}}
		for _, name := range ch.NFs {
			nf := c.s.NF(name)
			if nf == nil {
				return fmt.Errorf("%s: %w: NF %q unknown", where, ErrUnroutable, name)
			}
			members = append(members, member{node: nf.Node, nf: name})
		}
		members = append(members, member{node: ch.Egress})
		for slot := range OPoTSlots {
			p, err := opot.GenerateFrom(c.keys, len(members))
			if err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
			for j, m := range members {
				sn := c.nodes[m.node]
				if sn == nil {
					return fmt.Errorf("%s: %w: node %q unknown", where, ErrUnroutable, m.node)
				}
				params, err := p.Node(j)
				if err != nil {
					return fmt.Errorf("%s: %w", where, err)
				}
				b, err := params.MarshalBinary()
				if err != nil {
					return fmt.Errorf("%s: %w", where, err)
				}
				sn.Secrets = append(sn.Secrets, state.Secret{Name: OPoTSecretName(ch.Name, i+1, slot), NF: m.nf, Value: b})
			}
		}
	}
	return nil
}

// keysOrDefault is r, or crypto/rand when r is nil.
func keysOrDefault(r io.Reader) io.Reader {
	if r == nil {
		return cryptorand.Reader
	}
	return r
}
