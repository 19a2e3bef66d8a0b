package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// getColumns are the table columns of each kind: header and the JSON
// field shown (dotted for nested fields).
var getColumns = map[string][][2]string{
	"chains": {{"NAME", "name"}, {"INGRESS", "ingress"}, {"EGRESS", "egress"}, {"NFS", "nfs"}, {"MATCH", "match.dst"}, {"MODE", "mode"}},
	"nodes":  {{"NAME", "name"}, {"ROLE", "role"}, {"LOCATOR", "locator"}, {"DATAPATH", "datapath"}},
	"nfs":    {{"NAME", "name"}, {"KIND", "kind"}, {"NODE", "node"}, {"SID", "sid"}, {"BEHAVIOR", "behavior"}},
	"links":  {{"NAME", "name"}, {"ENDPOINTS", "endpoints"}, {"MTU", "mtu"}},
}

func init() {
	var o remoteOptions
	var output string
	cmd := &cobra.Command{
		Use:       "get chains|nodes|nfs|links [NAME]",
		Short:     "List objects stored by the controller",
		Long:      "get lists the controller's objects of one kind as a table, or as JSON with -o json.\nFields a spec leaves to defaults show as empty.",
		Args:      cobra.RangeArgs(1, 2),
		ValidArgs: []string{"chains", "nodes", "nfs", "links"},
		RunE: func(cmd *cobra.Command, args []string) error {
			kind := args[0]
			cols, ok := getColumns[kind]
			if !ok {
				return fmt.Errorf("get: unknown kind %q (chains, nodes, nfs, links)", kind)
			}
			if output != "" && output != "json" && output != "table" {
				return fmt.Errorf("get: -o %q: want json or table", output)
			}
			cl, err := o.client()
			if err != nil {
				return err
			}
			var items []map[string]any
			if len(args) == 2 {
				var one map[string]any
				if err := cl.Do(cmd.Context(), "GET", "/v1/"+kind+"/"+args[1], nil, &one); err != nil {
					return err
				}
				items = append(items, one)
			} else {
				var list struct {
					Items []map[string]any `json:"items"`
				}
				if err := cl.Do(cmd.Context(), "GET", "/v1/"+kind, nil, &list); err != nil {
					return err
				}
				items = list.Items
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if len(args) == 2 {
					return enc.Encode(items[0])
				}
				return enc.Encode(items)
			}
			return printTable(cmd.OutOrStdout(), cols, items)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: table (default) or json")
	o.flags(cmd)
	rootCmd.AddCommand(cmd)
}

func printTable(w io.Writer, cols [][2]string, items []map[string]any) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := make([]string, len(cols))
	for i, c := range cols {
		head[i] = c[0]
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, it := range items {
		row := make([]string, len(cols))
		for i, c := range cols {
			row[i] = cell(field(it, c[1]))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

// field follows a dotted path through decoded JSON.
func field(v any, path string) any {
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// cell renders one value: lists comma-separated, endpoints as NODE:IF.
func cell(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			if m, ok := e.(map[string]any); ok && m["node"] != nil {
				parts[i] = fmt.Sprintf("%v:%v", m["node"], m["interface"])
			} else {
				parts[i] = cell(e)
			}
		}
		return strings.Join(parts, ",")
	case float64:
		return fmt.Sprint(x)
	default:
		return fmt.Sprint(x)
	}
}
