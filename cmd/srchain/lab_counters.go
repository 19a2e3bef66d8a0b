package main

import (
	"encoding/json"

	"github.com/spf13/cobra"

	"github.com/srchain/srchain/internal/lab"
)

// newLabCountersCmd prints what the eBPF programs of a lab counted.
func newLabCountersCmd(e *env) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "counters NAME|FILE [NODE]",
		Short: "Print the counters of a lab's eBPF programs and kernel SIDs (per SID, per rule, drops by reason)",
		Long: "counters reads, for every srchain program of the lab's nodes (or of NODE),\n" +
			"the counters its driver keeps: End per-SID packets and bytes, FIB outcomes and\n" +
			"drops by reason; firewall per-rule packets and bytes and drops by reason.\n" +
			"It reads the pins from the host, which `lab exec` cannot see.\n" +
			"Kernel (seg6local) SIDs are shown as program seg6local: the kernel's own\n" +
			"per-SID packets, bytes and errors (`count`, Linux >= 5.14).",
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := labName(args[0])
			if err != nil {
				return err
			}
			node := ""
			if len(args) == 2 {
				node = args[1]
			}
			pcs, err := lab.Counters(cmd.Context(), name, node, e.labOpts())
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(pcs)
			}
			lab.PrintCounters(cmd.OutOrStdout(), pcs)
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}
