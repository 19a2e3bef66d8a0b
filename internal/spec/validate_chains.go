package spec

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/srchain/srchain/internal/opot"
)

// Chain, classifier, path/MTU and probe checks.

// MaxChains bounds the chains of a spec: chain i of a 5-tuple classifier
// gets policy table 1000+i and rule priority 1000+i (internal/compile),
// which must stay clear of the kernel's reserved tables (252-255) and
// below the main table's rule (priority 32766).
const MaxChains = 20000

func (v *validator) chains() {
	s := v.s
	if len(s.Chains) > MaxChains {
		v.add("chains", "%d chains; at most %d (each 5-tuple chain needs its own policy table and rule priority)", len(s.Chains), MaxChains)
	}
	names := make([]string, len(s.Chains))
	type steer struct {
		ingress string
		dst     netip.Prefix
	}
	steered := map[steer]string{}
	sids := newSIDIndex(s, s.SIDs())
	for i := range s.Chains {
		c := &s.Chains[i]
		p := fmt.Sprintf("chains[%d]", i)
		names[i] = c.Name
		if v.name(p+".name", "chain", c.Name, MaxName) && (c.Name == ExpectNone || c.Name == ExpectDrop) {
			v.add(p+".name", "chain name %q is reserved (traffic expect)", c.Name)
		}
		inOK := v.router(p+".ingress", "ingress", c.Ingress)
		egOK := v.router(p+".egress", "egress", c.Egress)
		fam := v.match(p+".match", c)
		nfsOK := true
		if len(c.NFs) == 0 {
			v.add(p+".nfs", "a chain needs at least one NF (in every mode): with none there is no NF SID to steer through")
		}
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
		if fam != 0 {
			v.broadDst(p+".match", c, v.matchOverlaps(p+".match", c, sids))
		}
		if inOK && egOK && nfsOK {
			v.pathlets(p, c)
			v.path(p, c)
			v.segments(p, c)
			v.poolVariants(p, c)
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
	// Linux refuses an ip rule whose sport/dport range contains 65535
	// (fib_rules: FRA_SPORT_RANGE/FRA_DPORT_RANGE, EINVAL; MACHINE-NOTES),
	// so the kernel ingress could not install the chain. A range N-65535
	// cannot be written as accepted rules either (a single port 65535 is
	// refused too), and the eBPF ingress must steer exactly as the kernel
	// would: refuse it here, for both ingress kinds.
	for _, pr := range []struct {
		field string
		r     PortRange
	}{{"dport", m.DPort}, {"sport", m.SPort}} {
		if pr.r.To == maxRulePort+1 {
			v.add(p+"."+pr.field, "port range %s contains 65535, which Linux refuses in an ip rule (EINVAL): end it at %d", rangeText(pr.r), maxRulePort)
		}
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
// destination (RFC 8754 section 2, RFC 8986 section 5). A chain split
// into pathlets adds, at its deepest, one outer IPv6 header and SRH per
// nested pathlet (End.B6.Encaps keeps the packet whole inside). An OPoT
// chain's SRH also carries the proof's TLV, with the PadN of the kernel
// encap route's reservation (opot.ReservedLen, the larger of the two
// headends' TLV areas; docs/opot.md "Header size, MTU and MSS").
func (c *Chain) Overhead() int {
	if ps := c.split(); ps != nil {
		return pathletOverhead(ps)
	}
	tlvs := 0
	if c.OPoT {
		tlvs = opot.ReservedLen
	}
	if c.Mode == ModeInsert {
		return SRHFixedLen + SIDLen*(len(c.NFs)+1) + tlvs
	}
	return IPv6HeaderLen + SRHFixedLen + SIDLen*(len(c.NFs)+1) + tlvs
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
		case s.Node(t.From).Role == RoleLegacyNF:
			v.add(p+".from", "node %q is a legacy NF: probes start at hosts or routers", t.From)
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
			v.add(p+".expect", "expect is required: a chain name, %q or %q", ExpectNone, ExpectDrop)
		case t.Expect == ExpectNone, t.Expect == ExpectDrop:
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

// matchOverlaps rejects IPv6 classifier prefixes that overlap a locator
// or a SID: the ingress would steer the chain's own SRv6 packets (whose
// outer destination is a SID) into the policy again, re-encapsulating
// them (lwtunnel recursion).
// It returns the indexes of the destinations it reported.
func (v *validator) matchOverlaps(p string, c *Chain, sids *sidIndex) map[int]bool {
	s := v.s
	check := func(path string, q netip.Prefix) bool {
		if !q.IsValid() || !q.Addr().Is6() || q.Addr().Is4In6() {
			return false
		}
		for i, n := range s.Nodes {
			if n.Locator.IsValid() && n.Locator.Overlaps(q) {
				v.add(path, "%s overlaps locator %s of node %q (nodes[%d]): the ingress would steer the chain's own SRv6 packets (addressed to SIDs) into the policy again; match only prefixes outside every locator", q, n.Locator, n.Name, i)
				return true
			}
		}
		if sid, name, ok := sids.nf.overlap(q); ok {
			v.add(path, "%s overlaps SID %s of NF %q: the ingress would steer SRv6 packets addressed to it into the policy again", q, sid, name)
			return true
		}
		if sid, name, ok := sids.egress.overlap(q); ok {
			v.add(path, "%s overlaps egress SID %s of chain %q: the ingress would steer SRv6 packets addressed to it into the policy again", q, sid, name)
			return true
		}
		return false
	}
	bad := map[int]bool{}
	for k, q := range c.Match.Dst {
		if check(fmt.Sprintf("%s.dst[%d]", p, k), q) {
			bad[k] = true
		}
	}
	for k, q := range c.Match.Src {
		check(fmt.Sprintf("%s.src[%d]", p, k), q)
	}
	return bad
}

// sidIndex finds the SIDs a prefix overlaps without scanning them all,
// so that checking every chain's classifier stays linear in chains.
type sidIndex struct{ nf, egress prefixIndex }

func newSIDIndex(s *Spec, plan SIDPlan) *sidIndex {
	x := &sidIndex{}
	for i, nf := range s.NFs {
		if sid, ok := plan.NF[nf.Name]; ok {
			x.nf.add(sid.Masked(), nf.Name, i)
		}
	}
	for i, c := range s.Chains {
		if sid, ok := plan.Egress[c.Name]; ok {
			x.egress.add(sid.Masked(), c.Name, i)
		}
	}
	return x
}

// prefixIndex holds named prefixes and finds those overlapping a query
// with map lookups: per prefix length present, the one that could contain
// the query, and per query length asked, the longer prefixes under it.
// Spec prefix lengths are few, so checking n prefixes is linear in n.
type prefixIndex struct {
	all    []prefixRef
	byBits map[int]map[netip.Prefix][]prefixRef // by length, then prefix
	within map[int]map[netip.Prefix][]prefixRef // by query length l, then the longer prefix cut to l
}

type prefixRef struct {
	p     netip.Prefix
	name  string
	order int
}

func (x *prefixIndex) add(p netip.Prefix, name string, order int) {
	r := prefixRef{p.Masked(), name, order}
	x.all = append(x.all, r)
	if x.byBits == nil {
		x.byBits = map[int]map[netip.Prefix][]prefixRef{}
	}
	m := x.byBits[r.p.Bits()]
	if m == nil {
		m = map[netip.Prefix][]prefixRef{}
		x.byBits[r.p.Bits()] = m
	}
	m[r.p] = append(m[r.p], r)
	for l, w := range x.within {
		x.addWithin(w, l, r)
	}
}

func (x *prefixIndex) addWithin(w map[netip.Prefix][]prefixRef, l int, r prefixRef) {
	if r.p.Bits() > l && r.p.Addr().BitLen() >= l {
		k := netip.PrefixFrom(r.p.Addr(), l).Masked()
		w[k] = append(w[k], r)
	}
}

// overlapAll returns every indexed prefix that overlaps q, in order.
func (x *prefixIndex) overlapAll(q netip.Prefix) []prefixRef {
	q = q.Masked()
	var out []prefixRef
	// Prefixes of q's length or shorter overlap q iff they contain it.
	for bits, m := range x.byBits {
		if bits <= q.Bits() {
			out = append(out, m[netip.PrefixFrom(q.Addr(), bits).Masked()]...)
		}
	}
	// Longer prefixes overlap q iff q contains them.
	l := q.Bits()
	w, ok := x.within[l]
	if !ok {
		w = map[netip.Prefix][]prefixRef{}
		for _, r := range x.all {
			x.addWithin(w, l, r)
		}
		if x.within == nil {
			x.within = map[int]map[netip.Prefix][]prefixRef{}
		}
		x.within[l] = w
	}
	out = append(out, w[q]...)
	slices.SortFunc(out, func(a, b prefixRef) int { return a.order - b.order })
	return out
}

func (x *prefixIndex) overlap(q netip.Prefix) (netip.Prefix, string, bool) {
	all := x.overlapAll(q)
	if len(all) == 0 {
		return netip.Prefix{}, "", false
	}
	return all[0].p, all[0].name, true
}

// broadDst rejects a destination-only chain's destination that strictly
// contains a link subnet: the ingress routes those more specifically
// (connected or shortest-path routes), and the longest prefix wins, so
// traffic to them would never meet the chain's policy (which replaces
// only the route to the very same prefix): it would silently not be
// steered. A 5-tuple chain's policy has a table of its own, so there only
// an End.DX4/End.DX6 egress matters (one cross-connect next hop).
// Destinations in skip were reported already.
func (v *validator) broadDst(p string, c *Chain, skip map[int]bool) {
	s := v.s
	// Locators are not listed: matchOverlaps rejects any overlap with one.
	var routed []netip.Prefix
	for _, l := range s.Links {
		for _, e := range l.Endpoints {
			for _, a := range e.Addresses {
				if a.IsValid() && !slices.Contains(routed, a.Masked()) {
					routed = append(routed, a.Masked())
				}
			}
		}
	}
	slices.SortFunc(routed, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	for k, d := range c.Match.Dst {
		if !d.IsValid() || d != d.Masked() || skip[k] {
			continue
		}
		var inside []string
		for _, q := range routed {
			if family(q.Addr()) == family(d.Addr()) && q.Bits() > d.Bits() && d.Contains(q.Addr()) {
				inside = append(inside, q.String())
			}
		}
		if len(inside) == 0 {
			continue
		}
		if c.Match.HasFiveTuple() {
			// The policy sits alone in the chain's own table, chosen by
			// an ip rule before the main table: no more specific route
			// competes. Only a cross-connecting egress goes wrong: every
			// decapsulated packet goes to the one next hop toward the
			// chain's first destination.
			if c.Mode != ModeEncap || (c.EgressBehavior != EgressDX4 && c.EgressBehavior != EgressDX6) || !c.Match.Dst[0].IsValid() {
				continue
			}
			fam := family(d.Addr())
			nh, ok := s.NextHopToward(c.Egress, c.Match.Dst[0], fam)
			if !ok {
				continue // reported by chains()
			}
			for _, q := range inside {
				qp := netip.MustParsePrefix(q)
				if other, ok := s.NextHopToward(c.Egress, qp, fam); ok && other != nh {
					v.add(fmt.Sprintf("%s.dst[%d]", p, k),
						"%s contains link subnet %s, which egress %q reaches via %s, but %s cross-connects every decapsulated packet of the chain to %s (its next hop toward %s); use End.DT6 (IPv6), narrower prefixes, or one chain per direction",
						d, qp, c.Egress, other, c.EgressBehavior, nh, c.Match.Dst[0])
					break
				}
			}
			continue
		}
		more := ""
		if len(inside) > 3 {
			more = fmt.Sprintf(" and %d more", len(inside)-3)
			inside = inside[:3]
		}
		v.add(fmt.Sprintf("%s.dst[%d]", p, k),
			"%s contains link subnet(s) %s%s, to which ingress %q has more specific routes (the longest prefix wins, the policy replaces only the route to %s itself), so traffic to them would not be steered; list the destination subnets themselves (e.g. dst: [%s]) or prefixes inside one",
			d, strings.Join(inside, ", "), more, c.Ingress, d, inside[0])
	}
}

// Segment limits, measured on Linux 6.18 (docs/spec.md):
const (
	// MaxSRHSegments is the most segments the kernel accepts in a seg6
	// encap route (encap and inline): 127 is accepted, 128 fails with
	// EINVAL (the SRH header length is 8-bit, in 8-octet units).
	MaxSRHSegments = 127
	// MaxEBPFSegments is SRCHAIN_MAX_SEGS (bpf/lib/common.h): srchain's
	// eBPF programs drop an SRH whose last entry is >= 16.
	MaxEBPFSegments = 16
	// MaxLocalSIDs is how many seg6 steps the kernel runs back to back
	// on one node for one received packet: each seg6local SID whose next
	// segment is local again (and, at the ingress, the SR policy itself,
	// an lwtunnel on input) nests one lwtunnel_input call; the 9th hits
	// "lwtunnel_input(): recursion limit reached on datapath" and the
	// packet is dropped. Measured: 8 End SIDs in a row on a transit node
	// deliver, 9 drop; at the ingress 7 after the encap policy deliver,
	// 8 drop.
	MaxLocalSIDs = 8
)

// SRHSegments is how many segments the chain's SRH holds: the NF SIDs
// plus the egress SID (encap) or the original destination (insert).
func (c *Chain) SRHSegments() int { return len(c.NFs) + 1 }

// longestSRH is the most segments one SRH of the chain's packets holds:
// SRHSegments, or at most max_sids when the chain splits into pathlets.
func (c *Chain) longestSRH() int {
	if c.Splits() {
		return c.MaxSIDs
	}
	return c.SRHSegments()
}

// segments checks the segment-list limits: the kernel's, srchain's eBPF
// programs' when a node on the path runs them, and the number of SIDs in
// a row the kernel runs on one node.
func (v *validator) segments(p string, c *Chain) {
	s := v.s
	n := c.longestSRH()
	if n > MaxSRHSegments {
		v.add(p+".nfs", "the chain's SRH would hold %d segments (%d NFs + 1), but the kernel accepts at most %d in a seg6 route (EINVAL); use at most %d NFs or set max_sids to split it into pathlets",
			n, len(c.NFs), MaxSRHSegments, MaxSRHSegments-1)
		return
	}
	if n > MaxEBPFSegments {
		hops, err := s.ChainPath(c)
		if err == nil {
			if c.Mode == ModeInsert && len(c.Match.Dst) > 0 && c.Match.Dst[0].IsValid() {
				hops = append(hops, s.pathToward(c.Egress, c.Match.Dst[0])...)
			}
			nodes := []string{c.Ingress}
			for _, h := range hops {
				nodes = append(nodes, h.To)
			}
			for _, name := range nodes {
				if nd := s.Node(name); nd != nil && nd.Role == RoleRouter && nd.EBPFDatapath() {
					v.add(p+".nfs", "the chain's SRH would hold %d segments (%d NFs + 1), but node %q on its path runs srchain's eBPF datapath, which handles at most %d (SRCHAIN_MAX_SEGS); use at most %d NFs, max_sids %d or less (pathlets), or datapath: kernel",
						n, len(c.NFs), name, MaxEBPFSegments, MaxEBPFSegments-1, MaxEBPFSegments)
					break
				}
			}
		}
	}
	// Runs of seg6 steps the kernel executes back to back on one node,
	// starting with the SR policy at the ingress.
	runNode, run, policy := c.Ingress, 1, true
	count := func(node, path, what string, kernel, leaves bool) {
		if !kernel {
			runNode, run, policy = "", 0, false
			return
		}
		if node != runNode {
			runNode, run, policy = node, 0, false
		}
		run++
		if run == MaxLocalSIDs+1 {
			where := fmt.Sprintf("SID %d in a row on node %q", run, node)
			if policy {
				where = fmt.Sprintf("SID %d in a row on ingress %q after its SR policy (seg6 step %d there)", run-1, node, run)
			}
			v.add(path, "%s is %s; the kernel runs at most %d seg6 steps in a row on one node (SIDs, and at the ingress the SR policy; more are dropped: lwtunnel_input recursion limit); move an NF to another node or use datapath: ebpf",
				what, where, MaxLocalSIDs)
		}
		if leaves {
			runNode, run, policy = "", 0, false
		}
	}
	nfStep := func(k int) bool {
		nf := s.NF(c.NFs[k])
		if nf == nil || s.Node(nf.Node) == nil {
			return false
		}
		nd := s.Node(nf.Node)
		count(nf.Node, fmt.Sprintf("%s.nfs[%d]", p, k), fmt.Sprintf("NF %q", nf.Name), nd.Datapath == DatapathKernel, nf.Behavior == BehaviorEndX)
		return true
	}
	if ps := s.Pathlets(c); ps != nil {
		// Binding SIDs and pathlet ends are kernel seg6local routes.
		for _, st := range PathletSteps(ps) {
			switch {
			case st.NF >= 0:
				if !nfStep(st.NF) {
					return
				}
			case st.Binding > 0:
				count(st.Node, p+".max_sids", fmt.Sprintf("the binding SID of pathlet %d", st.Binding), true, false)
			default:
				count(st.Node, p+".max_sids", fmt.Sprintf("the End.DT6 closing pathlet %d", st.End), true, false)
			}
		}
	} else {
		for k := range c.NFs {
			if !nfStep(k) {
				return
			}
		}
	}
	if c.Mode == ModeEncap {
		count(c.Egress, p+".egress", "the egress SID", true, true)
	}
}
