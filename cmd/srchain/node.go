package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/srchain/srchain/internal/hostnode"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/state"
)

// errDrift is `node status`'s exit for a node that differs from its spec.
var errDrift = errors.New("node differs from its desired state")

type nodeOptions struct {
	node, stateDir string
	dryRun, asJSON bool
}

// newNodeCmd is the one-shot for one router without a controller: apply a
// spec's node to this host (the namespace srchain runs in), show its
// drift and counters, and remove it again (docs/deploy.md).
func newNodeCmd(e *env) *cobra.Command {
	var o nodeOptions
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Apply one node of a spec to this host, show its status, reset it",
		Long: "node applies the desired state of one spec node to the network namespace\n" +
			"srchain runs in (the host, or the one `ip netns exec` put it in), with the\n" +
			"same applier and NF drivers as the agent, and no controller. What it changes\n" +
			"on the host is recorded under --state-dir first; `node reset` removes what\n" +
			"srchain added and restores the recorded values (docs/deploy.md).",
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&o.node, "node", "", "the spec's node this host is (required)")
	pf.StringVar(&o.stateDir, "state-dir", hostnode.DefaultStateDir, "keeps the record of what was applied and changed (STATE-DIR/node/NODE[@NETNS].json)")
	_ = cmd.MarkPersistentFlagRequired("node")

	applyCmd := &cobra.Command{
		Use:   "apply SPEC --node NAME",
		Short: "Apply NAME's desired state from SPEC to this host (idempotent)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := specNode(cmd, args[0], o.node)
			if err != nil {
				return err
			}
			ns, err := openHost(cmd)
			if err != nil {
				return err
			}
			defer ns.Close()
			res, err := hostnode.Apply(cmd.Context(), ns, n, hostnode.Options{StateDir: o.stateDir, Spec: args[0], DryRun: o.dryRun})
			if err != nil {
				return fmt.Errorf("node apply: %w", err)
			}
			w := cmd.OutOrStdout()
			if o.dryRun {
				for _, p := range res.Pending {
					fmt.Fprintln(w, p)
				}
				fmt.Fprintf(w, "node %s (%s): %d changes would be made (dry run)\n", n.Name, ns.Name, countChanges(res.Pending))
				return nil
			}
			fmt.Fprintf(w, "node %s (%s): %d changes, record %s\n", n.Name, ns.Name, res.Changes, res.Record)
			return nil
		},
	}
	applyCmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "print what would change, change nothing")

	statusCmd := &cobra.Command{
		Use:   "status SPEC --node NAME",
		Short: "Print NAME's drift from SPEC on this host and its counters; exit 1 on drift",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := specNode(cmd, args[0], o.node)
			if err != nil {
				return err
			}
			ns, err := openHost(cmd)
			if err != nil {
				return err
			}
			defer ns.Close()
			st, err := hostnode.Check(cmd.Context(), ns, n, hostnode.Options{StateDir: o.stateDir})
			if err != nil {
				return fmt.Errorf("node status: %w", err)
			}
			w := cmd.OutOrStdout()
			if o.asJSON {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				if err := enc.Encode(st); err != nil {
					return err
				}
			} else {
				printNodeStatus(w, n.Name, ns.Name, st)
			}
			if len(st.Drift) > 0 {
				return fmt.Errorf("node %s: %d items: %w", n.Name, len(st.Drift), errDrift)
			}
			return nil
		},
	}
	statusCmd.Flags().BoolVar(&o.asJSON, "json", false, "print JSON")

	resetCmd := &cobra.Command{
		Use:   "reset --node NAME",
		Short: "Remove what `node apply` added to this host and restore what it changed",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, err := openHost(cmd)
			if err != nil {
				return err
			}
			defer ns.Close()
			done, err := hostnode.Reset(cmd.Context(), ns, o.node, hostnode.Options{StateDir: o.stateDir, DryRun: o.dryRun})
			w := cmd.OutOrStdout()
			for _, d := range done {
				fmt.Fprintln(w, d)
			}
			if errors.Is(err, hostnode.ErrNoRecord) {
				// What carried srchain's marks is gone; nothing recorded
				// to restore (never applied, or reset already).
				fmt.Fprintf(w, "node %s (%s): no record, removed only what srchain tags\n", o.node, ns.Name)
				return nil
			}
			if err != nil {
				return fmt.Errorf("node reset: %w", err)
			}
			fmt.Fprintf(w, "node %s (%s): reset\n", o.node, ns.Name)
			return nil
		},
	}
	resetCmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "print what would be removed and restored, change nothing")

	cmd.AddCommand(applyCmd, statusCmd, resetCmd)
	return cmd
}

// specNode loads and compiles a spec and returns one node's desired state.
// openHost is the network namespace the command runs in, with the
// caller's mounts (bpffs) in view (hostMounts).
func openHost(cmd *cobra.Command) (*netns.NS, error) {
	if err := hostMounts(cmd.Name()); err != nil {
		return nil, err
	}
	return hostnode.Open()
}

func specNode(cmd *cobra.Command, file, node string) (state.Node, error) {
	_, net, err := loadAndCompile(file)
	if err != nil {
		return state.Node{}, specProblems(cmd, err)
	}
	for _, n := range net.Nodes {
		if n.Name == node {
			return n, nil
		}
	}
	return state.Node{}, fmt.Errorf("spec %s has no node %q", file, node)
}

// countChanges counts a dry run's changes, not its notes.
func countChanges(pending []string) int {
	n := 0
	for _, p := range pending {
		if !strings.HasPrefix(p, "record ") {
			n++
		}
	}
	return n
}

func printNodeStatus(w io.Writer, node, ns string, st hostnode.Status) {
	if len(st.Drift) == 0 {
		fmt.Fprintf(w, "node %s (%s): as desired\n", node, ns)
	} else {
		fmt.Fprintf(w, "node %s (%s): %d items differ\n", node, ns, len(st.Drift))
		for _, d := range st.Drift {
			fmt.Fprintln(w, "  "+d)
		}
	}
	if len(st.Counters) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROGRAM\tNF\tCOUNTER\tVALUE")
	for _, pc := range st.Counters {
		prog := pc.Program + " (" + strings.Join(pc.Interfaces, ",") + ")"
		nf := pc.NF
		if nf == "" {
			nf = "-"
		}
		if pc.Error != "" {
			fmt.Fprintf(tw, "%s\t%s\tERROR: %s\t-\n", prog, nf, pc.Error)
			continue
		}
		for _, c := range pc.Counters {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", prog, nf, c.Name, c.Value)
		}
	}
	tw.Flush()
}
