package spec

import "fmt"

// Limits of the eBPF ingress (bpf/ingress.c, docs/datapath.md "The
// ingress program"). The classifier is the firewall's bit-vector engine:
// one rule per (destination, source) pair of a chain's match.
const (
	// MaxIngressRules is how many classifier rules one router's eBPF
	// ingress holds (FW_MAX_RULES of bpf/lib/fw_maps.h).
	MaxIngressRules = 10240
	// MaxIngressSegments is the longest segment list it writes
	// (SRCHAIN_MAX_SEGS); the kernel's seg6 encap takes longer ones.
	MaxIngressSegments = 16
)

// ingress checks `ingress:` on every node and what an eBPF ingress can
// hold: its chains' segment lists and classifier rules.
func (v *validator) ingress() {
	s := v.s
	rules := map[string]int{}
	for i, n := range s.Nodes {
		p := fmt.Sprintf("nodes[%d].ingress", i)
		switch n.Role {
		case RoleRouter:
			// "" is the default (kernel) for specs built in code, which
			// skip applyDefaults.
			if n.Ingress != "" && n.Ingress != IngressKernel && n.Ingress != IngressEBPF {
				v.add(p, "ingress must be %q or %q, got %q", IngressKernel, IngressEBPF, n.Ingress)
			}
		case RoleHost, RoleLegacyNF:
			if n.Ingress != "" {
				v.add(p, "a %s has no ingress (only routers steer traffic into chains)", n.Role)
			}
		}
	}
	for i, c := range s.Chains {
		n := s.Node(c.Ingress)
		if n == nil || n.Ingress != IngressEBPF {
			continue
		}
		// Encap: the NF SIDs and the egress SID; insert: the NF SIDs
		// and the original destination (segment[0]).
		segs := len(c.NFs) + 1
		if segs > MaxIngressSegments {
			v.add(fmt.Sprintf("chains[%d].nfs", i), "%d segments, but node %q has ingress: ebpf, which writes at most %d (use ingress: kernel)", segs, n.Name, MaxIngressSegments)
		}
		rules[n.Name] += len(c.Match.Dst) * max(1, len(c.Match.Src))
	}
	for i, n := range s.Nodes {
		if rules[n.Name] > MaxIngressRules {
			v.add(fmt.Sprintf("nodes[%d].ingress", i), "node %q has ingress: ebpf and %d classifier entries (destination x source pairs of its chains), at most %d", n.Name, rules[n.Name], MaxIngressRules)
		}
	}
}
