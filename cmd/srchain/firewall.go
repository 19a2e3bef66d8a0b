package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/srchain/srchain/internal/apply"
	"github.com/srchain/srchain/internal/firewall"
	fwkind "github.com/srchain/srchain/internal/kinds/firewall"
	"github.com/srchain/srchain/internal/lab"
)

// fwTarget names a deployed firewall: --pin, or --lab/--node/--nf.
type fwTarget struct{ pin, lab, node, nf, rules string }

func (t *fwTarget) flags(c *cobra.Command) {
	c.Flags().StringVar(&t.pin, "pin", "", "bpffs directory the firewall is pinned in")
	c.Flags().StringVar(&t.lab, "lab", "", "lab name (with --node and --nf)")
	c.Flags().StringVar(&t.node, "node", "", "node running the firewall")
	c.Flags().StringVar(&t.nf, "nf", "", "firewall NF name")
	c.Flags().StringVar(&t.rules, "rules", "", "rules file, to label the counters")
}

func (t *fwTarget) dir() (string, error) {
	if t.pin != "" {
		return t.pin, nil
	}
	if t.lab == "" || t.node == "" || t.nf == "" {
		return "", fmt.Errorf("name the firewall with --pin or --lab, --node and --nf")
	}
	return filepath.Join(apply.PinRoot, lab.NSName(t.lab, t.node), "fw-"+t.nf), nil
}

// labRules finds the rules of a lab's firewall in its record, to label
// counters; nil when the record cannot be read.
func labRules(t fwTarget) []firewall.Rule {
	rec, err := lab.Load(t.lab, lab.Options{})
	if err != nil || rec.Network == nil {
		return nil
	}
	for _, n := range rec.Network.Nodes {
		if n.Name != t.node {
			continue
		}
		for _, p := range n.Programs {
			if p.Kind != fwkind.Name || p.NF != t.nf {
				continue
			}
			cfg, err := fwkind.ConfigFromProgram(p, func(string) (uint32, error) { return 1, nil })
			if err == nil {
				return cfg.Rules
			}
		}
	}
	return nil
}

// countersJSON is `srchain firewall counters --json`. Bytes are IP bytes
// (IPv6 or IPv4 header and payload, no Ethernet header), as ip6tables
// counts them.
type countersJSON struct {
	Mode   string            `json:"mode"`
	Rules  []ruleCountJSON   `json:"rules"`
	Policy countJSON         `json:"policy"`
	Drops  map[string]uint64 `json:"drops"` // packets per drop reason, non-zero ones
}

type countJSON struct {
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
}

type ruleCountJSON struct {
	Rule int    `json:"rule"` // 1-based position in the rule set
	Text string `json:"text,omitempty"`
	countJSON
}

func writeCountersJSON(w io.Writer, m firewall.Mode, rc []firewall.RuleCount, drops map[string]uint64) error {
	out := countersJSON{Mode: m.String(), Rules: []ruleCountJSON{}, Drops: drops}
	for _, r := range rc {
		c := countJSON{Packets: r.Packets, Bytes: r.Bytes}
		if r.Rule < 0 {
			out.Policy = c
			continue
		}
		out.Rules = append(out.Rules, ruleCountJSON{Rule: r.Rule + 1, Text: r.Text, countJSON: c})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func newFirewallCmd(e *env) *cobra.Command {
	fw := &cobra.Command{
		Use:   "firewall",
		Short: "SERA SR-aware firewall: check rules, read counters, switch mode",
	}

	var mode string
	check := &cobra.Command{
		Use:   "check FILE",
		Short: "Parse a rule file and print what the classifier compiles to",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := os.ReadFile(args[0])
			if err != nil {
				return fmt.Errorf("read rules: %w", err)
			}
			rules, err := firewall.Parse(string(b))
			if err != nil {
				return fmt.Errorf("%s:\n%w", args[0], err)
			}
			for i, r := range rules {
				// ip6tables warns likewise ("never matched protocol").
				if f, never := r.NeverMatches(); never {
					fmt.Fprintf(cmd.ErrOrStderr(), "%s:%d: warning: rule %d never matches: its %s conditions admit no value\n", args[0], r.Line, i+1, f)
				}
			}
			// Interfaces get placeholder indexes: check does not need a host.
			n := uint32(0)
			idx := map[string]uint32{}
			rules, err = firewall.Resolve(rules, func(name string) (uint32, error) {
				if _, ok := idx[name]; !ok {
					n++
					idx[name] = n
				}
				return idx[name], nil
			})
			if err != nil {
				return err
			}
			c, err := firewall.Compile(rules)
			if err != nil {
				return err
			}
			st := c.Stats()
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintf(w, "rules\t%d\n", st.Rules)
			fmt.Fprintf(w, "bitmap words\t%d (of %d)\n", st.Words, firewall.Words)
			fmt.Fprintf(w, "distinct bitmaps\t%d (%d KiB in the map)\n", st.Bitmaps, st.Bitmaps*(8*(3+firewall.Words))/1024)
			fmt.Fprintf(w, "fields used\t%d\n", st.FieldsUsed)
			for f := firewall.Field(0); f < firewall.NumFields; f++ {
				t := c.Fields[f]
				if !t.Used {
					continue
				}
				fmt.Fprintf(w, "  %s\t%d prefixes, %d intervals\n", f, len(t.Prefixes), len(t.Intervals))
			}
			var srh int
			for _, r := range rules {
				if r.UsesSRH() {
					srh++
				}
			}
			fmt.Fprintf(w, "rules with srh matches\t%d\n", srh)
			if mode != "" {
				if _, err := firewall.ParseMode(mode); err != nil {
					return fmt.Errorf("mode %q: want basic or advanced", mode)
				}
			}
			return w.Flush()
		},
	}
	check.Flags().StringVar(&mode, "mode", "", "check the mode name too")

	var ct fwTarget
	var jsonOut bool
	counters := &cobra.Command{
		Use:   "counters",
		Short: "Print a deployed firewall's per-rule and drop counters",
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := ct.dir()
			if err != nil {
				return err
			}
			p, err := firewall.OpenPinned(dir)
			if err != nil {
				return err
			}
			defer p.Close()
			var rules []firewall.Rule
			if ct.rules == "" && ct.lab != "" {
				rules = labRules(ct)
			}
			if ct.rules != "" {
				b, err := os.ReadFile(ct.rules)
				if err != nil {
					return fmt.Errorf("read rules: %w", err)
				}
				if rules, err = firewall.Parse(string(b)); err != nil {
					return err
				}
			}
			m, _, err := p.Mode()
			if err != nil {
				return err
			}
			rc, err := p.RuleCounts(rules)
			if err != nil {
				return err
			}
			dc, err := p.DropCounts()
			if err != nil {
				return err
			}
			drops := dc.NonZero()
			names := slices.Sorted(maps.Keys(drops))
			if jsonOut {
				return writeCountersJSON(cmd.OutOrStdout(), m, rc, drops)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintf(w, "mode\t%v\n\nRULE\tPACKETS\tBYTES\tTEXT\n", m)
			for _, r := range rc {
				id := fmt.Sprint(r.Rule + 1)
				if r.Rule < 0 {
					id = "policy"
				}
				fmt.Fprintf(w, "%s\t%d\t%d\t%s\n", id, r.Packets, r.Bytes, r.Text)
			}
			fmt.Fprintf(w, "\nDROP REASON\tPACKETS\n")
			for _, name := range names {
				fmt.Fprintf(w, "%s\t%d\n", name, drops[name])
			}
			return w.Flush()
		},
	}
	ct.flags(counters)
	counters.Flags().BoolVar(&jsonOut, "json", false, "print JSON (countersJSON) instead of a table")

	var mt fwTarget
	setMode := &cobra.Command{
		Use:   "mode basic|advanced",
		Short: "Switch a deployed firewall between basic and advanced mode (no reload)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := firewall.ParseMode(args[0])
			if err != nil {
				return fmt.Errorf("mode %q: want basic or advanced", args[0])
			}
			dir, err := mt.dir()
			if err != nil {
				return err
			}
			p, err := firewall.OpenPinned(dir)
			if err != nil {
				return err
			}
			defer p.Close()
			return p.SetMode(m)
		},
	}
	mt.flags(setMode)

	fw.AddCommand(check, counters, setMode)
	return fw
}
