package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/srchain/srchain/internal/controller"
	"github.com/srchain/srchain/internal/spec"
)

func newGetCmd(e *env) *cobra.Command {
	var o remoteOptions
	var output string
	cmd := &cobra.Command{
		Use:   "get chains|nodes|nfs|links [NAME]",
		Short: "Show objects stored by the controller",
		Long: "get shows the controller's objects of one kind as a table, with the spec's\n" +
			"defaults and allocated SIDs filled in, or as stored (JSON) with -o json.",
		Args:      cobra.RangeArgs(1, 2),
		ValidArgs: controller.Kinds,
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, name := args[0], ""
			if len(args) == 2 {
				name = args[1]
			}
			if !strings.Contains(" "+strings.Join(controller.Kinds, " ")+" ", " "+kind+" ") {
				return fmt.Errorf("get: unknown kind %q (%s)", kind, strings.Join(controller.Kinds, ", "))
			}
			if output != "" && output != "json" && output != "table" {
				return fmt.Errorf("get: -o %q: want json or table", output)
			}
			cl, err := o.client()
			if err != nil {
				return err
			}
			if output == "json" {
				return getJSON(cmd, cl, kind, name)
			}
			// The whole spec, so that defaults and SIDs are those the
			// controller compiled.
			var raw json.RawMessage
			if err := cl.Do(cmd.Context(), "GET", "/v1/spec", nil, &raw); err != nil {
				return err
			}
			s, err := spec.Parse(raw, o.server+"/v1/spec")
			if err != nil {
				return fmt.Errorf("decode the controller's spec: %w", err)
			}
			if s == nil {
				s = &spec.Spec{}
			}
			rows := getTable(s, kind, name)
			if name != "" && len(rows) == 1 {
				return fmt.Errorf("get: %s/%s not found", kind, name)
			}
			return printRows(cmd.OutOrStdout(), rows)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: table (default) or json")
	o.flags(cmd)
	return cmd
}

func getJSON(cmd *cobra.Command, cl *controller.Client, kind, name string) error {
	var v any
	if name != "" {
		if err := cl.Do(cmd.Context(), "GET", "/v1/"+kind+"/"+name, nil, &v); err != nil {
			return err
		}
	} else {
		var list struct {
			Items []any `json:"items"`
		}
		if err := cl.Do(cmd.Context(), "GET", "/v1/"+kind, nil, &list); err != nil {
			return err
		}
		v = list.Items
	}
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// getTable returns a header row and one row per object of kind (only the
// one named name, when set).
func getTable(s *spec.Spec, kind, name string) [][]string {
	sids := s.SIDs()
	var rows [][]string
	add := func(id string, cells ...string) {
		if name == "" || id == name {
			rows = append(rows, cells)
		}
	}
	switch kind {
	case controller.KindNodes:
		rows = append(rows, []string{"NAME", "ROLE", "LOCATOR", "DATAPATH"})
		for _, n := range s.Nodes {
			add(n.Name, n.Name, n.Role, prefix(n.Locator), n.Datapath)
		}
	case controller.KindLinks:
		rows = append(rows, []string{"ID", "ENDPOINTS", "MTU"})
		for _, l := range s.Links {
			eps := make([]string, len(l.Endpoints))
			for i, e := range l.Endpoints {
				eps[i] = e.Node + ":" + e.Interface
			}
			id := l.Name
			if id == "" {
				id = strings.Join(eps, ",") // the API's id of an unnamed link
			}
			add(id, id, strings.Join(eps, " "), strconv.Itoa(l.MTU))
		}
	case controller.KindNFs:
		rows = append(rows, []string{"NAME", "KIND", "NODE", "SID", "BEHAVIOR", "SR-AWARE"})
		for _, nf := range s.NFs {
			add(nf.Name, nf.Name, nf.Kind, nf.Node, prefix(sids.NF[nf.Name]), nf.Behavior, strconv.FormatBool(nf.IsSRAware()))
		}
	case controller.KindChains:
		rows = append(rows, []string{"NAME", "INGRESS", "EGRESS", "NFS", "MATCH", "MODE", "EGRESS-SID"})
		for _, c := range s.Chains {
			add(c.Name, c.Name, c.Ingress, c.Egress, strings.Join(c.NFs, ","), match(c.Match), c.Mode, prefix(sids.Egress[c.Name]))
		}
	}
	return rows
}

func prefix(p netip.Prefix) string {
	if !p.IsValid() {
		return "-"
	}
	return p.String()
}

// match shows a classifier compactly: dst[,src][ proto[ dport]].
func match(m spec.Match) string {
	var parts []string
	for _, p := range m.Dst {
		parts = append(parts, p.String())
	}
	out := strings.Join(parts, ",")
	if len(m.Src) > 0 {
		out += " from"
		for _, p := range m.Src {
			out += " " + p.String()
		}
	}
	if m.Proto != "" {
		out += " " + m.Proto
	}
	if !m.DPort.IsZero() {
		b, _ := m.DPort.MarshalText()
		out += " dport " + string(b)
	}
	if !m.SPort.IsZero() {
		b, _ := m.SPort.MarshalText()
		out += " sport " + string(b)
	}
	return out
}

func printRows(w io.Writer, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}
