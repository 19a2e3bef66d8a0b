package main

import (
	"fmt"
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/srchain/srchain/internal/lab"
)

func newLabApplyCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "apply NAME|FILE",
		Short: "Apply a changed spec to a running lab, or repair drift",
		Long: "apply FILE validates and compiles FILE and makes the running lab of that name\n" +
			"match it: every node gets the difference between the state recorded at `lab up`\n" +
			"(or the last `lab apply FILE`) and FILE's, so added, changed and removed chains,\n" +
			"NFs and rules take effect while unchanged ones keep forwarding untouched. Nodes,\n" +
			"links and interfaces must stay the same (that needs `lab down` and `lab up`).\n" +
			"The record is updated once every node has applied.\n\n" +
			"apply NAME re-applies the recorded state to every node. What is already as\n" +
			"desired is left alone; what drifted (an interface set down, a route or SID\n" +
			"deleted, a program detached) is put back. `lab status` shows the drift.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			var changes map[string]int
			var err error
			if fi, serr := os.Stat(args[0]); serr == nil && fi.Mode().IsRegular() {
				_, net, lerr := loadAndCompile(args[0])
				if lerr != nil {
					return specProblems(cmd, lerr)
				}
				changes, err = lab.Update(ctx, net, lab.UpOptions{Options: e.labOpts(), Source: args[0]})
			} else {
				changes, err = lab.Reapply(ctx, args[0], e.labOpts())
			}
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
	}
}
