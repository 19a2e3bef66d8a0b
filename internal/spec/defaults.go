package spec

import "fmt"

// Defaults, all applied here by Parse (docs/spec.md lists the same table).
const (
	DefaultLocatorBits  = 64
	DefaultFunctionBits = 48
	DefaultArgsBits     = 16 // LOC:FUNCT:ARGS = 64:48:16 as in seed 000 section VI.A
	DefaultMTU          = 1500
	DefaultKind         = "forward"
)

// applyDefaults fills in every optional field that has a default. A field
// the file sets explicitly (even to a zero value) is left alone, so that
// Validate can reject e.g. "mtu: 0".
func (s *Spec) applyDefaults() {
	if !s.has("sid_format") {
		s.SIDFormat = SIDFormat{LocatorBits: DefaultLocatorBits, FunctionBits: DefaultFunctionBits, ArgsBits: DefaultArgsBits}
	}
	for i := range s.Nodes {
		n := &s.Nodes[i]
		if n.Datapath == "" && n.Role == RoleRouter {
			n.Datapath = DatapathKernel
		}
		if n.Ingress == "" && n.Role == RoleRouter {
			n.Ingress = IngressKernel
		}
		if l := n.LegacyNF; l != nil {
			for k := range l.RateLimit {
				r := &l.RateLimit[k]
				if !s.has(fmt.Sprintf("nodes[%d].legacy_nf.rate_limit[%d].burst_bytes", i, k)) {
					r.BurstBytes = DefaultBurstBytes
				}
				if !s.has(fmt.Sprintf("nodes[%d].legacy_nf.rate_limit[%d].latency_ms", i, k)) {
					r.LatencyMS = DefaultLatencyMS
				}
			}
		}
	}
	for i := range s.Links {
		if !s.has(fmt.Sprintf("links[%d].mtu", i)) {
			s.Links[i].MTU = DefaultMTU
		}
	}
	for i := range s.NFs {
		nf := &s.NFs[i]
		if nf.Kind == "" {
			nf.Kind = DefaultKind
		}
		if nf.Behavior == "" {
			nf.Behavior = BehaviorEnd
		}
	}
	for i := range s.Chains {
		c := &s.Chains[i]
		if c.Mode == "" {
			c.Mode = ModeEncap
		}
		// The decapsulation follows the inner family: End.DX4 for IPv4;
		// End.DT6 for IPv6 because it needs no next-hop and End.DX6 to a
		// local address drops silently (MACHINE-NOTES, quirks).
		if c.EgressBehavior == "" && c.Mode == ModeEncap {
			switch c.Family() {
			case 4:
				c.EgressBehavior = EgressDX4
			case 6:
				c.EgressBehavior = EgressDT6
			}
		}
	}
	s.resolvePools()
	for i := range s.Traffic {
		if s.Traffic[i].Proto == "" {
			s.Traffic[i].Proto = ProtoICMP
		}
	}
}

// has reports whether the file sets the field at path.
func (s *Spec) has(path string) bool {
	_, ok := s.pos[path]
	return ok
}
