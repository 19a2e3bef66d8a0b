package main

import (
	"encoding/json"

	"github.com/spf13/cobra"

	"github.com/srchain/srchain/internal/lab"
)

// newLabEventsCmd prints (and drains) what the eBPF programs of a lab
// reported on their event rings.
func newLabEventsCmd(e *env) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "events NAME|FILE [NODE]",
		Short: "Print the events a lab's eBPF programs reported (OPoT verifier drops), once each",
		Long: "events drains, for every srchain program of the lab's nodes (or of NODE) that\n" +
			"reports events, its event ring and prints each event once: today the OPoT\n" +
			"verifier's drops, with the chain, the reason (opot-verify, opot-replay,\n" +
			"opot-stale, opot-no-tlv, opot-no-profile), the profile slot and, for a\n" +
			"replayed or stale packet, its sequence number. A full ring loses events,\n" +
			"never counts: `lab counters` has every drop. It reads the pins from the host.",
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
			evs, err := lab.Events(cmd.Context(), name, node, e.labOpts())
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if jerr := enc.Encode(evs); jerr != nil {
					return jerr
				}
			} else {
				lab.PrintEvents(cmd.OutOrStdout(), evs)
			}
			return err
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}
