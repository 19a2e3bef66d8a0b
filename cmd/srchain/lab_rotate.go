package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/srchain/srchain/internal/lab"
)

// newLabRotateCmd rotates the OPoT keys of a running lab's chains.
func newLabRotateCmd(e *env) *cobra.Command {
	var chains []string
	c := &cobra.Command{
		Use:   "rotate NAME|FILE",
		Short: "Give a running lab's OPoT chains new keys without dropping packets",
		Long: "rotate draws a new OPoT profile for each chain (every chain with opot: true, or\n" +
			"those named with --chain), installs it in the profile slot the headend does not\n" +
			"use on every node of the chain, then switches the headend to it. Packets already\n" +
			"on their way with the old slot keep verifying: its keys stay until the next\n" +
			"rotation, which must come after they drained. Only the changed keys and the\n" +
			"headend's slot are applied (docs/opot.md \"Rotation\").",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := labName(args[0])
			if err != nil {
				return err
			}
			rs, err := lab.RotateOPoT(cmd.Context(), name, chains, e.labOpts())
			if err != nil {
				return err
			}
			for _, r := range rs {
				fmt.Fprintf(cmd.OutOrStdout(), "chain %s: new keys in slot %d on %s; headend %s starts packets with slot %d\n",
					r.Chain, r.Slot, strings.Join(r.Nodes, ", "), r.Headend, r.Slot)
			}
			return nil
		},
	}
	c.Flags().StringSliceVar(&chains, "chain", nil, "rotate only this chain (repeatable)")
	return c
}
