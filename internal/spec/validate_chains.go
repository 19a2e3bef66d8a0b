package spec

import (
	"fmt"
	"net/netip"
	"slices"
)

// Chain, classifier, path/MTU and probe checks.

func (v *validator) chains() {
	s := v.s
	names := make([]string, len(s.Chains))
	type steer struct {
		ingress string
		dst     netip.Prefix
	}
	steered := map[steer]string{}
	for i := range s.Chains {
		c := &s.Chains[i]
		p := fmt.Sprintf("chains[%d]", i)
		names[i] = c.Name
		if v.name(p+".name", "chain", c.Name, MaxName) && c.Name == ExpectNone {
			v.add(p+".name", "chain name %q is reserved (traffic expect)", ExpectNone)
		}
		inOK := v.router(p+".ingress", "ingress", c.Ingress)
		egOK := v.router(p+".egress", "egress", c.Egress)
		fam := v.match(p+".match", c)
		nfsOK := true
		for k, name := range c.NFs {
			if s.NF(name) == nil {
				v.add(fmt.Sprintf("%s.nfs[%d]", p, k), "unknown NF %q", name)
				nfsOK = false
			}
		}
		switch c.Mode {
		case ModeEncap:
			switch c.EgressBehavior {
			case EgressDX4:
				if fam == 6 {
					v.add(p+".egress_behavior", "End.DX4 decapsulates IPv4, but the chain matches IPv6")
				}
			case EgressDX6, EgressDT6:
				if fam == 4 {
					v.add(p+".egress_behavior", "%s decapsulates IPv6, but the chain matches IPv4", c.EgressBehavior)
				}
			case "":
				// Only when the family is unknown; match reports that.
			default:
				v.add(p+".egress_behavior", "egress_behavior must be End.DX4, End.DX6 or End.DT6, got %q", c.EgressBehavior)
			}
			if c.EgressSID.IsValid() && (!c.EgressSID.Is6() || c.EgressSID.Is4In6()) {
				v.add(p+".egress_sid", "SID %s is not a plain IPv6 address", c.EgressSID)
			}
			if n := s.Node(c.Egress); egOK && !c.EgressSID.IsValid() && !n.Locator.IsValid() {
				v.add(p+".egress", "egress %q has no locator to allocate the decapsulation SID from", c.Egress)
			}
			if egOK && fam != 0 && c.Match.Dst[0].IsValid() && (c.EgressBehavior == EgressDX4 || c.EgressBehavior == EgressDX6) {
				if _, ok := s.NextHopToward(c.Egress, c.Match.Dst[0], fam); !ok {
					v.add(p+".match.dst[0]", "%s: no IPv%d next hop from egress %q toward it (it must overlap a reachable link subnet)", c.EgressBehavior, fam, c.Egress)
				}
			}
		case ModeInsert:
			if fam == 4 {
				v.add(p+".mode", "insert mode carries IPv6 only (the SRH goes into the original IPv6 header), but the chain matches IPv4")
			}
			if len(c.NFs) == 0 {
				v.add(p+".nfs", "insert mode needs at least one NF")
			}
			if c.EgressBehavior != "" {
				v.add(p+".egress_behavior", "egress_behavior is not used in insert mode")
			}
			if c.EgressSID.IsValid() {
				v.add(p+".egress_sid", "egress_sid is not used in insert mode")
			}
		default:
			v.add(p+".mode", "mode must be %q or %q, got %q", ModeEncap, ModeInsert, c.Mode)
		}
		if inOK && egOK && c.Ingress == c.Egress && c.Mode == ModeEncap {
			// Measured: the kernel does not deliver a packet encapsulated
			// toward the ingress's own decapsulation SID.
			v.add(p+".egress", "egress must differ from the ingress in encap mode")
		}
		if inOK && egOK && nfsOK {
			v.path(p, c)
		}
		if inOK && fam != 0 && !c.Match.HasFiveTuple() {
			for k, d := range c.Match.Dst {
				key := steer{c.Ingress, d.Masked()}
				if prev, ok := steered[key]; ok {
					v.add(fmt.Sprintf("%s.match.dst[%d]", p, k), "%s is already steered at %s by chain %q", d, c.Ingress, prev)
				} else {
					steered[key] = c.Name
				}
			}
		}
	}
	v.unique("chain", names, func(i int) string { return fmt.Sprintf("chains[%d].name", i) })
}

// match checks a classifier and returns its family (0 if unknown).
func (v *validator) match(p string, c *Chain) int {
	m := &c.Match
	if len(m.Dst) == 0 {
		v.add(p+".dst", "at least one destination prefix is required")
		return 0
	}
	fam := c.Family()
	check := func(path string, q netip.Prefix) {
		switch {
		case !q.IsValid():
			v.add(path, "bad prefix")
		case q.Addr().Zone() != "" || q.Addr().Is4In6():
			v.add(path, "prefix %s must be plain IPv4 or IPv6", q)
		case q != q.Masked():
			v.add(path, "prefix %s has host bits set (did you mean %s?)", q, q.Masked())
		case family(q.Addr()) != fam:
			v.add(path, "prefix %s is IPv%d but the chain's first destination is IPv%d; use one family per chain", q, family(q.Addr()), fam)
		}
	}
	for k, q := range m.Dst {
		check(fmt.Sprintf("%s.dst[%d]", p, k), q)
	}
	for k, q := range m.Src {
		check(fmt.Sprintf("%s.src[%d]", p, k), q)
	}
	switch m.Proto {
	case "", ProtoTCP, ProtoUDP, ProtoICMP:
	case ProtoICMPv6:
		if fam == 4 {
			v.add(p+".proto", "icmpv6 does not match IPv4 traffic")
		}
	default:
		v.add(p+".proto", "proto must be tcp, udp, icmp or icmpv6, got %q", m.Proto)
	}
	if m.Proto != ProtoTCP && m.Proto != ProtoUDP {
		if !m.DPort.IsZero() {
			v.add(p+".dport", "ports need proto tcp or udp")
		}
		if !m.SPort.IsZero() {
			v.add(p+".sport", "ports need proto tcp or udp")
		}
	}
	return fam
}

// path checks that the chain's packets can travel ingress -> NFs -> egress
// and that every link on the way can carry the encapsulated packet.
func (v *validator) path(p string, c *Chain) {
	hops, err := v.s.ChainPath(c)
	if err != nil {
		v.add(p, "%v", err)
		return
	}
	if c.Mode == ModeInsert && len(c.Match.Dst) > 0 && c.Match.Dst[0].IsValid() {
		// The inserted SRH stays in the packet up to the destination.
		hops = append(hops, v.s.pathToward(c.Egress, c.Match.Dst[0])...)
	}
	need := c.Overhead() + MinInnerPacket
	for _, h := range hops {
		if mtu := v.s.Links[h.Link].MTU; mtu < need {
			v.add(p, "links[%d] (%s-%s) has mtu %d, but the chain needs %d (%d bytes of SR overhead + a %d-byte inner packet)",
				h.Link, h.From, h.To, mtu, need, c.Overhead(), MinInnerPacket)
			return
		}
	}
}

// Overhead is the bytes the chain's SR policy adds to each packet: in
// encap mode an outer IPv6 header and an SRH with the NF SIDs plus the
// egress SID; in insert mode an SRH with the NF SIDs plus the original
// destination (RFC 8754 section 2, RFC 8986 section 5).
func (c *Chain) Overhead() int {
	if c.Mode == ModeInsert {
		return SRHFixedLen + SIDLen*(len(c.NFs)+1)
	}
	return IPv6HeaderLen + SRHFixedLen + SIDLen*(len(c.NFs)+1)
}

func (v *validator) traffic() {
	s := v.s
	names := make([]string, len(s.Traffic))
	for i, t := range s.Traffic {
		p := fmt.Sprintf("traffic[%d]", i)
		names[i] = t.Name
		v.name(p+".name", "probe", t.Name, MaxName)
		switch {
		case t.From == "":
			v.add(p+".from", "from is required")
		case s.Node(t.From) == nil:
			v.add(p+".from", "unknown node %q", t.From)
		}
		if !t.To.IsValid() {
			v.add(p+".to", "to is required")
		} else if t.To.Zone() != "" || t.To.Is4In6() {
			v.add(p+".to", "address %s must be plain IPv4 or IPv6", t.To)
		}
		switch t.Proto {
		case ProtoICMP, ProtoICMPv6:
			if t.DPort != 0 {
				v.add(p+".dport", "ports need proto tcp or udp")
			}
		case ProtoTCP, ProtoUDP:
			if t.DPort < 1 || t.DPort > 65535 {
				v.add(p+".dport", "dport must be 1..65535 for %s, got %d", t.Proto, t.DPort)
			}
		default:
			v.add(p+".proto", "proto must be tcp, udp, icmp or icmpv6, got %q", t.Proto)
		}
		switch {
		case t.Expect == "":
			v.add(p+".expect", "expect is required: a chain name or %q", ExpectNone)
		case t.Expect == ExpectNone:
		case s.Chain(t.Expect) == nil:
			v.add(p+".expect", "unknown chain %q", t.Expect)
		default:
			c := s.Chain(t.Expect)
			if t.To.IsValid() && !slices.ContainsFunc(c.Match.Dst, func(d netip.Prefix) bool { return d.Contains(t.To) }) {
				v.add(p+".to", "%s is not in any destination of chain %q", t.To, c.Name)
			}
			v.probeMatches(p, t, c)
		}
	}
	v.unique("probe", names, func(i int) string { return fmt.Sprintf("traffic[%d].name", i) })
}

// probeMatches reports a probe that expects a chain whose 5-tuple
// classifier it cannot match, so the lab check would fail for a reason
// that has nothing to do with the data plane.
func (v *validator) probeMatches(p string, t Probe, c *Chain) {
	m := c.Match
	norm := func(proto string) string {
		if proto == ProtoICMPv6 {
			return ProtoICMP
		}
		return proto
	}
	if m.Proto != "" && norm(m.Proto) != norm(t.Proto) {
		v.add(p+".proto", "chain %q matches proto %s, the probe sends %s", c.Name, m.Proto, t.Proto)
	}
	if !m.DPort.IsZero() && (t.DPort < int(m.DPort.From) || t.DPort > int(m.DPort.To)) {
		v.add(p+".dport", "chain %q matches dport %d-%d, the probe sends to %d", c.Name, m.DPort.From, m.DPort.To, t.DPort)
	}
	if !m.SPort.IsZero() {
		v.add(p+".expect", "chain %q matches source ports, which a probe cannot choose", c.Name)
	}
}
