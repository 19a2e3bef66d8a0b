package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/srchain/srchain/internal/compile"
	"github.com/srchain/srchain/internal/fwstate"
	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
)

func newPlanCmd(e *env) *cobra.Command {
	var node string
	var asJSON, stats bool
	var fatTree, chains int
	cmd := &cobra.Command{
		Use:   "plan FILE",
		Short: "Print the desired state the compiler produces, per node",
		Long: "plan validates and compiles FILE and prints, for every node (or only --node),\n" +
			"its interfaces, sysctls, routes, SR policies, SIDs, rules and eBPF programs,\n" +
			"in iproute2-like notation. --json prints the state the applier consumes, secrets redacted.\n" +
			"--stats prints instead the forwarding entries per node with source routing\n" +
			"(srchain) and with rule-based chaining (one entry per chain per hop; seed 004\n" +
			"Fig. 3); --fat-tree K --chains N plans a generated k-ary fat tree instead of FILE.",
		Args: func(cmd *cobra.Command, args []string) error {
			if fatTree > 0 {
				return cobra.NoArgs(cmd, args)
			}
			return cobra.ExactArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var s *spec.Spec
			var net *state.Network
			var err error
			file := ""
			if fatTree > 0 {
				file = fmt.Sprintf("fat-tree k=%d", fatTree)
				s, net, err = fatTreeSpec(fatTree, chains)
			} else {
				file = args[0]
				s, net, err = loadAndCompile(file)
			}
			if err != nil {
				return specProblems(cmd, err)
			}
			if stats {
				return writeStats(cmd.OutOrStdout(), s, net, asJSON)
			}
			return writePlan(cmd.OutOrStdout(), s, net, node, asJSON, file)
		},
	}
	cmd.Flags().StringVar(&node, "node", "", "print only this node")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the desired state (with --stats: the counts) as JSON")
	cmd.Flags().BoolVar(&stats, "stats", false, "print forwarding entries per node: source routing vs rule-based")
	cmd.Flags().IntVar(&fatTree, "fat-tree", 0, "plan a generated k-ary fat tree (k even, 4..32) instead of FILE")
	cmd.Flags().IntVar(&chains, "chains", 1000, "with --fat-tree: chains placed across racks")
	return cmd
}

func fatTreeSpec(k, chains int) (*spec.Spec, *state.Network, error) {
	doc, err := fwstate.FatTree(k, chains, 1)
	if err != nil {
		return nil, nil, err
	}
	s, err := spec.Parse(doc, fmt.Sprintf("fat-tree-%d.yaml", k))
	if err != nil {
		return nil, nil, err
	}
	if err := s.Validate(); err != nil {
		return nil, nil, err
	}
	net, err := compile.Compile(s)
	return s, net, err
}

// writeStats prints fwstate's counts per node and the routers' summary.
func writeStats(out io.Writer, s *spec.Spec, net *state.Network, asJSON bool) error {
	es, err := fwstate.Count(s, net)
	if err != nil {
		return err
	}
	sum := fwstate.Summarize(es)
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Nodes   []fwstate.Entries `json:"nodes"`
			Summary fwstate.Summary   `json:"summary"`
		}{es, sum})
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "node\trole\tsource routing\t(ingress\tlocators\tsids)\trule-based")
	for _, e := range es {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\n", e.Node, e.Role, e.SourceRouting(), e.Ingress, e.Locators, e.SIDs, e.RuleBased)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "%d chains, %d routers: per router max %d / mean %.1f entries with source routing, max %d / mean %.1f rule-based (totals %d / %d)\n",
		len(s.Chains), sum.Routers, sum.SRMax, sum.SRMean, sum.RBMax, sum.RBMean, sum.SRTotal, sum.RBTotal)
	return err
}

// writePlan prints net (only node, when given) as text or JSON, with
// every secret redacted: secrets (OPoT keys) never leave through plan.
func writePlan(out io.Writer, s *spec.Spec, net *state.Network, node string, asJSON bool, file string) error {
	net = net.Redacted()
	if node != "" {
		var only []state.Node
		for _, n := range net.Nodes {
			if n.Name == node {
				only = append(only, n)
			}
		}
		if only == nil {
			return fmt.Errorf("plan: no node %q in %s", node, file)
		}
		net.Nodes = only
	}
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if node != "" {
			return enc.Encode(net.Nodes[0])
		}
		return enc.Encode(net)
	}
	if node == "" {
		printChains(out, s, net)
	}
	printPlan(out, net, node == "")
	return nil
}

func printPlan(w io.Writer, net *state.Network, withLinks bool) {
	if withLinks {
		fmt.Fprintf(w, "lab %s: %d nodes, %d links\n", net.Name, len(net.Nodes), len(net.Links))
		for _, l := range net.Links {
			fmt.Fprintf(w, "  link %s/%s <-> %s/%s mtu %d\n", l.A.Node, l.A.Interface, l.B.Node, l.B.Interface, l.MTU)
		}
		fmt.Fprintln(w)
	}
	for _, n := range net.Nodes {
		fmt.Fprintf(w, "node %s (%s)\n", n.Name, n.Role)
		if n.TunSrc.IsValid() {
			fmt.Fprintf(w, "  tunsrc %s\n", n.TunSrc)
		}
		section(w, "interfaces", len(n.Interfaces))
		for _, i := range n.Interfaces {
			fmt.Fprintf(w, "    %-8s mtu %d  %s  -> %s/%s\n", i.Name, i.MTU, joinPrefixes(i.Addrs), i.Peer.Node, i.Peer.Interface)
		}
		for _, p := range n.Loopback {
			fmt.Fprintf(w, "    lo       %s\n", p)
		}
		section(w, "sysctls", len(n.Sysctls))
		for _, s := range n.Sysctls {
			fmt.Fprintf(w, "    %s=%s\n", s.Key, s.Value)
		}
		var plain, policies []state.Route
		for _, r := range n.Routes {
			if r.Encap != nil {
				policies = append(policies, r)
			} else {
				plain = append(plain, r)
			}
		}
		section(w, "routes", len(plain))
		for _, r := range plain {
			fmt.Fprintf(w, "    %s\n", routeString(r))
		}
		section(w, "sr policies", len(policies))
		for _, r := range policies {
			fmt.Fprintf(w, "    %s\n", routeString(r))
		}
		section(w, "rules", len(n.Rules))
		for _, r := range n.Rules {
			fmt.Fprintf(w, "    %s\n", ruleString(r))
		}
		section(w, "sids", len(n.SIDs))
		for _, s := range n.SIDs {
			fmt.Fprintf(w, "    %s\n", sidString(s))
		}
		section(w, "programs", len(n.Programs))
		for _, p := range n.Programs {
			fmt.Fprintf(w, "    %s on %s%s\n", p.Kind, strings.Join(p.Interfaces, ","), programConfig(p))
		}
		section(w, "secrets", len(n.Secrets))
		for _, sec := range n.Secrets {
			fmt.Fprintf(w, "    %s [nf %s] (redacted)\n", sec.Name, sec.NF)
		}
		fmt.Fprintln(w)
	}
}

// printChains summarises each chain: classifier, the SIDs in travel order
// with the node and behavior behind each, and the MTU budget.
func printChains(w io.Writer, s *spec.Spec, net *state.Network) {
	sids := map[netip.Addr]string{}
	for _, n := range net.Nodes {
		for _, sid := range n.SIDs {
			desc := fmt.Sprintf("%s %s", n.Name, sid.Behavior)
			if sid.NF != "" {
				desc = fmt.Sprintf("%s %s(%s)", n.Name, sid.NF, sid.Behavior)
			}
			sids[sid.SID.Masked().Addr()] = desc
		}
	}
	bits := s.SIDFormat.SIDBits()
	for _, c := range s.Chains {
		fmt.Fprintf(w, "chain %s: %s %s at %s", c.Name, matchString(c.Match), c.Mode, c.Ingress)
		for _, n := range net.Nodes {
			for _, r := range n.Routes {
				if n.Name != c.Ingress || r.Chain != c.Name || r.Encap == nil || r.Dst != c.Match.Dst[0] {
					continue
				}
				for _, seg := range r.Encap.Segments {
					in := chainSIDs(s, c, seg)
					if len(in) == 1 && in[0] == seg {
						p, _ := seg.Prefix(bits)
						fmt.Fprintf(w, " -> %s [%s]", seg, sids[p.Addr()])
						continue
					}
					fmt.Fprintf(w, " -> container %s {", seg)
					for k, sid := range in {
						p, _ := sid.Prefix(bits)
						if k > 0 {
							fmt.Fprint(w, ",")
						}
						fmt.Fprintf(w, " %s [%s]", sid, sids[p.Addr()])
					}
					fmt.Fprint(w, " }")
				}
			}
		}
		if c.Mode == spec.ModeInsert {
			fmt.Fprintf(w, " -> destination")
		}
		printPathlets(w, s, net, c, sids)
		if f := s.SIDFormat.CSID; c.Compression == spec.CompressionNextCSID && f != nil {
			full := c.SRHSegments()
			packed := (full + f.PerContainer() - 1) / f.PerContainer()
			fmt.Fprintf(w, "\n  next-c-sid: %d SIDs in %d container(s), SRH %d bytes instead of %d: %d bytes saved per packet",
				full, packed, spec.SRHFixedLen+spec.SIDLen*packed, spec.SRHFixedLen+spec.SIDLen*full, spec.SIDLen*(full-packed))
			fmt.Fprintf(w, "\n  overhead %d bytes per packet\n", c.Overhead()-spec.SIDLen*(full-packed))
		} else {
			fmt.Fprintf(w, "\n  overhead %d bytes per packet\n", c.Overhead())
		}
	}
	if len(s.Chains) > 0 {
		fmt.Fprintln(w)
	}
}

func matchString(m spec.Match) string {
	var parts []string
	for _, d := range m.Dst {
		parts = append(parts, "to "+d.String())
	}
	for _, src := range m.Src {
		parts = append(parts, "from "+src.String())
	}
	if m.Proto != "" {
		parts = append(parts, m.Proto)
	}
	if !m.DPort.IsZero() {
		parts = append(parts, "dport "+portString(state.PortRange(m.DPort)))
	}
	if !m.SPort.IsZero() {
		parts = append(parts, "sport "+portString(state.PortRange(m.SPort)))
	}
	return strings.Join(parts, " ")
}

func section(w io.Writer, name string, n int) {
	if n > 0 {
		fmt.Fprintf(w, "  %s:\n", name)
	}
}

func joinPrefixes(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, " ")
}

func routeString(r state.Route) string {
	var b strings.Builder
	b.WriteString(r.Dst.String())
	if r.Encap != nil {
		segs := make([]string, len(r.Encap.Segments))
		for i, s := range r.Encap.Segments {
			segs[i] = s.String()
		}
		fmt.Fprintf(&b, " encap seg6 mode %s segs %s", r.Encap.Mode, strings.Join(segs, ","))
		if len(r.Encap.TLVs) > 0 {
			fmt.Fprintf(&b, " tlvs %x", r.Encap.TLVs)
		}
	}
	if r.Via.IsValid() {
		fmt.Fprintf(&b, " via %s", r.Via)
	}
	if r.Dev != "" {
		fmt.Fprintf(&b, " dev %s", r.Dev)
	}
	if r.Table != 0 {
		fmt.Fprintf(&b, " table %d", r.Table)
	}
	if r.Chain != "" {
		fmt.Fprintf(&b, "  [chain %s]", r.Chain)
	}
	return b.String()
}

func ruleString(r state.Rule) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d: -%d", r.Priority, r.Family)
	if r.Src.IsValid() {
		fmt.Fprintf(&b, " from %s", r.Src)
	} else {
		b.WriteString(" from all")
	}
	if r.Dst.IsValid() {
		fmt.Fprintf(&b, " to %s", r.Dst)
	}
	if r.IPProto != 0 {
		fmt.Fprintf(&b, " ipproto %d", r.IPProto)
	}
	if r.SPort != (state.PortRange{}) {
		fmt.Fprintf(&b, " sport %s", portString(r.SPort))
	}
	if r.DPort != (state.PortRange{}) {
		fmt.Fprintf(&b, " dport %s", portString(r.DPort))
	}
	if r.IIF != "" {
		fmt.Fprintf(&b, " iif %s", r.IIF)
	}
	fmt.Fprintf(&b, " lookup %d", r.Table)
	if r.Chain != "" {
		fmt.Fprintf(&b, "  [chain %s]", r.Chain)
	}
	return b.String()
}

func portString(p state.PortRange) string {
	if p.From == p.To {
		return fmt.Sprint(p.From)
	}
	return fmt.Sprintf("%d-%d", p.From, p.To)
}

// printPathlets shows where and why a chain was split into pathlets: each
// pathlet's binding SID, host, segments and closing End.DT6.
func printPathlets(w io.Writer, s *spec.Spec, net *state.Network, c spec.Chain, sids map[netip.Addr]string) {
	ps := s.Pathlets(&c)
	if ps == nil {
		return
	}
	bind := s.SIDs().Binding[c.Name]
	levels := 0
	for k := range ps {
		d := 0
		for j := k; ps[j].Parent >= 0; j = ps[j].Parent {
			d++
		}
		levels = max(levels, d)
	}
	fmt.Fprintf(w, "\n  pathlets: %d segments exceed max_sids %d: %d pathlets, %d level(s) of binding SIDs (End.B6.Encaps)", c.SRHSegments(), c.MaxSIDs, len(ps)-1, levels)
	for k := 1; k < len(ps) && k-1 < len(bind); k++ {
		b := bind[k-1].Masked()
		fmt.Fprintf(w, "\n    pathlet %d: binding %s at %s:", k, b.Addr(), ps[k].Host)
		for _, n := range net.Nodes {
			for _, sid := range n.SIDs {
				if sid.SID != b {
					continue
				}
				for _, seg := range sid.Segments {
					fmt.Fprintf(w, " -> %s [%s]", seg, sids[seg])
				}
			}
		}
	}
}

// addrList renders addresses as "[a b c]".
func addrList(as []netip.Addr) string {
	parts := make([]string, len(as))
	for i, a := range as {
		parts[i] = a.String()
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func sidString(s state.LocalSID) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s action %s", s.SID, s.Behavior)
	if s.NH4.IsValid() {
		fmt.Fprintf(&b, " nh4 %s", s.NH4)
	}
	if s.NH6.IsValid() {
		fmt.Fprintf(&b, " nh6 %s", s.NH6)
	}
	if s.OIF != "" {
		fmt.Fprintf(&b, " oif %s", s.OIF)
	}
	if s.Table != 0 {
		fmt.Fprintf(&b, " table %d", s.Table)
	}
	if len(s.Segments) > 0 {
		fmt.Fprintf(&b, " segs %s", addrList(s.Segments))
	}
	if f := s.NextCSID; f != (state.CSIDFlavor{}) {
		fmt.Fprintf(&b, " flavors next-csid lblen %d nflen %d", f.BlockBits, f.NodeFunctionBits)
	}
	fmt.Fprintf(&b, "  (%s)", s.Datapath)
	if s.NF != "" {
		fmt.Fprintf(&b, " [nf %s]", s.NF)
	}
	return b.String()
}

// programConfig shows a program's NF and typed config (compact JSON, as
// the kind encoded it).
func programConfig(p state.Program) string {
	var b strings.Builder
	if p.NF != "" {
		fmt.Fprintf(&b, " [nf %s]", p.NF)
	}
	if len(p.Config) > 0 {
		var c bytes.Buffer
		if json.Compact(&c, p.Config) == nil {
			fmt.Fprintf(&b, " %s", c.String())
		}
	}
	return b.String()
}

// chainSIDs lists the SIDs a segment of chain c stands for: itself, or on
// a compressed chain each C-SID of the container as a full SID.
func chainSIDs(s *spec.Spec, c spec.Chain, seg netip.Addr) []netip.Addr {
	f := s.SIDFormat.CSID
	if c.Compression != spec.CompressionNextCSID || f == nil {
		return []netip.Addr{seg}
	}
	return state.CSIDFlavor{BlockBits: f.BlockBits, NodeFunctionBits: f.NodeFunctionBits}.Expand(seg)
}
