package spec

import "fmt"

// OPoTMaxNFs is the most NFs an OPoT chain may have: the proof's k
// (headend + NF nodes + verifier, docs/opot.md "The math") is at most 8,
// the largest the BPF tests cover.
const OPoTMaxNFs = 6

// opot checks the chains with opot: true. The proof needs one node per
// share: the headend (ingress), each NF's node, the verifier (egress), all
// distinct, so that a node never holds two shares and skipping one
// always changes the result. What the data plane does not do yet is
// refused rather than silently unverified (docs/opot.md "Limits"):
// insert mode (no decapsulating egress to verify before); NF pools are
// refused with the pool checks (each instance would need a share of its
// own). An NF node with datapath xdp runs the transit stage at XDP, in
// front of its XDP End (docs/pipeline.md). The headend is the kernel's seg6
// encap followed by a tc stage, or srchain's eBPF ingress writing the TLV
// as it encapsulates (`ingress: ebpf`). An SR-unaware NF is a proxy,
// whose kind checks that its behaviour can carry the proof
// (internal/kinds/proxy).
func (v *validator) opot() {
	s := v.s
	for i := range s.Chains {
		c := &s.Chains[i]
		if !c.OPoT {
			continue
		}
		p := fmt.Sprintf("chains[%d].opot", i)
		if c.Mode == ModeInsert {
			v.add(p, "opot needs encap mode: the verifier runs at the egress before it decapsulates")
		}
		if len(c.NFs) > OPoTMaxNFs {
			v.add(p, "opot supports at most %d NFs per chain, the chain has %d", OPoTMaxNFs, len(c.NFs))
		}
		seen := map[string]string{c.Ingress: "the ingress", c.Egress: "the egress"}
		for k, name := range c.NFs {
			nf := s.NF(name)
			if nf == nil {
				continue
			}
			path := fmt.Sprintf("chains[%d].nfs[%d]", i, k)
			if other, ok := seen[nf.Node]; ok {
				v.add(path, "NF %q runs on node %s, which is also %s: an opot chain needs one node per share", name, nf.Node, other)
				continue
			}
			seen[nf.Node] = fmt.Sprintf("the node of NF %q", name)
		}
	}
}
