package compile

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"

	"github.com/srchain/srchain/internal/opot"
	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
)

// nfSIDs instantiates one SID per NF on the NF's node: End, or End.X
// toward the neighbor on the NF's interface (RFC 8986 sections 4.1, 4.2).
func (c *compiler) nfSIDs() error {
	for i, nf := range c.s.NFs {
		if !nf.IsSRAware() && !servesLegacy(&nf) {
			return fmt.Errorf("compile nfs[%d] %s: SR-unaware NFs need an SR proxy: %w", i, nf.Name, ErrUnsupported)
		}
		p, ok := c.sids.NF[nf.Name]
		node := c.s.Node(nf.Node)
		if !ok || node == nil {
			return fmt.Errorf("compile nfs[%d] %s: no SID: %w", i, nf.Name, ErrUnroutable)
		}
		sid := state.LocalSID{SID: p.Masked(), Behavior: state.End, Datapath: sidDatapath(node), NF: nf.Name}
		if nf.Behavior == spec.BehaviorEndX {
			h, ok := c.s.HopOut(nf.Node, nf.Interface)
			nh, ok6 := c.s.PeerAddr(h, 6)
			if !ok || !ok6 {
				return fmt.Errorf("compile nfs[%d] %s: no IPv6 neighbor on %q: %w", i, nf.Name, nf.Interface, ErrUnroutable)
			}
			sid.Behavior, sid.OIF, sid.NH6 = state.EndX, nf.Interface, nh
		}
		if err := compileKind(c.s, &c.s.NFs[i], &sid, c.nodes[nf.Node]); err != nil {
			return fmt.Errorf("compile nfs[%d] %s: %w", i, nf.Name, err)
		}
		c.nodes[nf.Node].SIDs = append(c.nodes[nf.Node].SIDs, sid)
	}
	return nil
}

// chain compiles chains[i]: the egress decapsulation SID (encap mode), the
// ingress SR policy per destination prefix, and for a 5-tuple classifier
// the policy-routing rules that select the chain's own table.
func (c *compiler) chain(i int) error {
	ch := &c.s.Chains[i]
	where := fmt.Sprintf("compile chains[%d] %s", i, ch.Name)
	ingress := c.nodes[ch.Ingress]
	if ingress == nil || c.nodes[ch.Egress] == nil || len(ch.Match.Dst) == 0 {
		return fmt.Errorf("%s: %w: missing ingress, egress or destination", where, ErrUnroutable)
	}
	var segs []netip.Addr
	first := "" // node owning the first segment
	for _, name := range ch.NFs {
		p, ok := c.sids.NF[name]
		if !ok {
			return fmt.Errorf("%s: %w: NF %q has no SID", where, ErrUnroutable, name)
		}
		seg := p.Addr()
		if arg, ok := ch.Args[name]; ok {
			seg = c.s.SIDFormat.WithArgs(seg, arg)
		}
		segs = append(segs, seg)
		if nf := c.s.NF(name); first == "" && nf.Node != ch.Ingress {
			first = nf.Node
		}
	}
	mode := state.ModeInsert
	if ch.Mode == spec.ModeEncap {
		mode = state.ModeEncap
		sid, err := c.egressSID(ch)
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		eg := c.nodes[ch.Egress]
		eg.SIDs = append(eg.SIDs, sid)
		segs = append(segs, c.sids.Egress[ch.Name].Addr())
	}
	if first == "" {
		first = ch.Egress
	}
	if mode == state.ModeEncap {
		var err error
		if segs, err = c.pathlets(ch, segs); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
	}
	if ch.Compression == spec.CompressionNextCSID {
		var err error
		if segs, err = c.compress(ch, segs); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
	}
	// The route's device only satisfies the kernel (a route needs one):
	// after encapsulation the packet is routed again on its new
	// destination, the first segment (net/ipv6/seg6_iptunnel.c).
	dev := ""
	if first == ch.Ingress {
		// Every segment is local: any interface will do.
		if ifs := ifNames(ingress); len(ifs) > 0 {
			dev = ifs[0]
		}
	} else if hop, ok := c.s.ShortestPaths(ch.Ingress).FirstHop(first); ok {
		dev = hop.FromIf
	}
	if dev == "" {
		return fmt.Errorf("%s: %w: no path from %s to %s", where, ErrUnroutable, ch.Ingress, first)
	}
	if c.ebpfIngress(ch.Ingress) {
		if err := c.ingressChain(ch, mode, segs, dev); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
	}
	table := 0
	if ch.Match.HasFiveTuple() {
		if i >= spec.MaxChains {
			// Validate refuses this; the numbers below would run into
			// the main rule's priority.
			return fmt.Errorf("%s: %w: chain index %d, at most %d chains", where, ErrUnsupported, i, spec.MaxChains)
		}
		table = ChainTableBase + i
		// An eBPF ingress gets the rules too: a packet its fast path
		// does not finish exactly as the kernel would (fragments,
		// options, extension headers, martians) takes the kernel's own
		// path, which must steer it as the kernel ingress does
		// (docs/datapath.md "The ingress program").
		if err := c.rules(i, table); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
	}
	var tlvs []byte
	if ch.OPoT {
		// The headend stage fills the TLV the route reserves (an eBPF
		// ingress writes it as it encapsulates; the route serves the
		// packets it leaves to the kernel).
		tlvs = opot.Reservation()
	}
	// TCP at its default MSS must fit the chain (issue 34): the ingress
	// clamps the SYNs of the chain's flows (internal/mss).
	mss, tcp, err := MSSFor(c.s, ch)
	if err != nil {
		return fmt.Errorf("%s: %w: %w", where, ErrUnroutable, err)
	}
	if !tcp {
		mss = 0
	}
	for _, dst := range ch.Match.Dst {
		// A policy replaces the plain route to the same prefix (sortNode
		// drops that route once every chain is compiled: deleting it here
		// would rescan the node's routes for every chain).
		ingress.Routes = append(ingress.Routes, state.Route{
			Table: table, Dst: dst, Dev: dev, Chain: ch.Name, MSS: mss,
			Encap: &state.SREncap{Mode: mode, Segments: slices.Clone(segs), TLVs: slices.Clone(tlvs)},
		})
	}
	return nil
}

// egressSID is the chain's decapsulation SID (RFC 8986 sections 4.4, 4.5,
// 4.8). End.DX4/End.DX6 cross-connect to the next hop toward the chain's
// destination; End.DT6 looks the inner packet up in the main table.
func (c *compiler) egressSID(ch *spec.Chain) (state.LocalSID, error) {
	p, ok := c.sids.Egress[ch.Name]
	if !ok {
		return state.LocalSID{}, fmt.Errorf("%w: no egress SID", ErrUnroutable)
	}
	sid := state.LocalSID{SID: p.Masked(), Datapath: state.Kernel, Chain: ch.Name}
	switch ch.EgressBehavior {
	case spec.EgressDT6:
		sid.Behavior, sid.Table = state.EndDT6, TableMain
		return sid, nil
	case spec.EgressDX4:
		sid.Behavior = state.EndDX4
	case spec.EgressDX6:
		sid.Behavior = state.EndDX6
	default:
		return state.LocalSID{}, fmt.Errorf("%w: egress behavior %q", ErrUnsupported, ch.EgressBehavior)
	}
	fam := 4
	if sid.Behavior == state.EndDX6 {
		fam = 6
	}
	nh, ok := c.s.NextHopToward(ch.Egress, ch.Match.Dst[0], fam)
	if !ok {
		return state.LocalSID{}, fmt.Errorf("%w: no IPv%d next hop from %s toward %s", ErrUnroutable, fam, ch.Egress, ch.Match.Dst[0])
	}
	if fam == 4 {
		sid.NH4 = nh
	} else {
		sid.NH6 = nh
	}
	return sid, nil
}

// rules writes one ip rule per (destination, source) pair of a 5-tuple
// classifier, pointing at the chain's table.
func (c *compiler) rules(i, table int) error {
	ch := &c.s.Chains[i]
	fam := ch.Family()
	proto, err := ProtoNumber(ch.Match.Proto, fam)
	if err != nil {
		return err
	}
	srcs := ch.Match.Src
	if len(srcs) == 0 {
		srcs = []netip.Prefix{{}}
	}
	in := c.nodes[ch.Ingress]
	for _, dst := range ch.Match.Dst {
		for _, src := range srcs {
			in.Rules = append(in.Rules, state.Rule{
				Priority: RulePriorityBase + i, Family: fam, Src: src, Dst: dst, IPProto: proto,
				SPort: state.PortRange(ch.Match.SPort), DPort: state.PortRange(ch.Match.DPort),
				Table: table, Chain: ch.Name,
			})
		}
	}
	return nil
}

// ProtoNumber maps a spec protocol name to its IP protocol number for the
// given family ("icmp" is ICMPv6 for IPv6); "" is 0 (any).
func ProtoNumber(name string, fam int) (uint8, error) {
	switch name {
	case "":
		return 0, nil
	case spec.ProtoTCP:
		return 6, nil
	case spec.ProtoUDP:
		return 17, nil
	case spec.ProtoICMP:
		if fam == 6 {
			return 58, nil
		}
		return 1, nil
	case spec.ProtoICMPv6:
		return 58, nil
	}
	return 0, fmt.Errorf("%w: protocol %q", ErrUnsupported, name)
}

// programs attaches srchain's End program to every interface of a node
// whose End/End.X SIDs run in eBPF. It comes after the node's OPoT
// program (c.opot ran), whose pinned maps it loads when it does the
// transit of the node's chains (state.EndConfig.OPoT).
func (c *compiler) programs() error {
	for _, n := range c.s.Nodes {
		sn := c.nodes[n.Name]
		need := slices.ContainsFunc(sn.SIDs, func(s state.LocalSID) bool {
			return s.Datapath == state.EBPF && (s.Behavior == state.End || s.Behavior == state.EndX)
		})
		if !need {
			continue
		}
		p := state.Program{Kind: ProgramEnd, Interfaces: ifNames(sn)}
		if opotInEnd(sn) {
			b, err := json.Marshal(state.EndConfig{OPoT: true})
			if err != nil {
				return fmt.Errorf("compile end program of %s: %w", n.Name, err)
			}
			p.Config = b
		}
		sn.Programs = append(sn.Programs, p)
	}
	return nil
}

// sortNode puts every slice in the order state documents, after moving
// the plain routes that a chain's policy to the same prefix replaces to
// the node's shadowed routes.
func sortNode(n *state.Node) {
	n.Shadow()
	slices.SortFunc(n.Interfaces, func(a, b state.Interface) int { return cmp.Compare(a.Name, b.Name) })
	state.SortItems(n)
}
