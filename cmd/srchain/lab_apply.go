package main

import (
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/srchain/srchain/internal/lab"
)

func init() {
	labCmd.AddCommand(&cobra.Command{
		Use:   "apply NAME|FILE",
		Short: "Apply the lab's recorded state to every node again, repairing drift",
		Long: "apply re-applies the desired state recorded at `lab up` to every node. What is\n" +
			"already as desired is left alone; what drifted (an interface set down, a route\n" +
			"or SID deleted, a program detached) is put back. `lab status` shows the drift.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := labName(args[0])
			if err != nil {
				return err
			}
			ctx, cancel := signalContext()
			defer cancel()
			changes, err := lab.Reapply(ctx, name, labOpts())
			nodes := make([]string, 0, len(changes))
			for n := range changes {
				nodes = append(nodes, n)
			}
			slices.Sort(nodes)
			for _, n := range nodes {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: %d changes\n", n, changes[n])
			}
			return err
		},
	})
}
