package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"

	"github.com/spf13/cobra"

	"github.com/srchain/srchain/internal/lab"
	"github.com/srchain/srchain/internal/spec"
)

// labName accepts a lab name or the spec file it was built from. The file
// is only parsed for its name, so a lab can be removed even when its spec
// has since become invalid.
func labName(arg string) (string, error) {
	fi, err := os.Stat(arg)
	if err != nil || !fi.Mode().IsRegular() {
		return arg, nil
	}
	data, err := os.ReadFile(arg)
	if err != nil {
		return "", fmt.Errorf("read spec: %w", err)
	}
	s, _ := spec.Parse(data, arg)
	if s == nil || s.Name == "" {
		return "", fmt.Errorf("%s: no lab name in spec", arg)
	}
	return s.Name, nil
}

// newLabCmd is the parent of the lab subcommands (lab_*.go hold some).
func newLabCmd(e *env) *cobra.Command {
	labCmd := &cobra.Command{
		Use:   "lab",
		Short: "Deploy a spec into network namespaces on this machine",
		Long: "lab builds the topology of a spec in network namespaces (one per node,\n" +
			"named src-<lab>_<node>), one veth pair per link, and applies every node's\n" +
			"state (addresses, routes, SR policies, SIDs, eBPF programs). What it makes\n" +
			"is recorded in " + lab.DefaultStateDir + "/<lab>.json first, so `lab down`\n" +
			"removes everything even after a crash.",
	}
	labCmd.PersistentFlags().StringVar(&e.stateDir, "state-dir", "", "lab records directory (default "+lab.DefaultStateDir+")")

	var agents bool
	upCmd := &cobra.Command{
		Use:   "up FILE",
		Short: "Validate, compile and deploy FILE as a lab",
		Long: "up validates and compiles FILE, makes one network namespace per node and the\n" +
			"links, and applies every node. With --agents the nodes are applied the way a\n" +
			"deployment does it: `srchain serve` (embedded etcd on loopback) and one\n" +
			"`srchain agent` per node start as processes of the lab, FILE is submitted\n" +
			"through the API, and up returns when every agent has applied its node.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, net, err := loadAndCompile(args[0])
			if err != nil {
				return specProblems(cmd, err)
			}
			rec, err := lab.Up(cmd.Context(), net, lab.UpOptions{Options: e.labOpts(), Source: args[0], SkipApply: agents})
			if err != nil {
				return err
			}
			if agents {
				if err := startAgents(cmd.Context(), cmd.OutOrStdout(), rec, net, args[0], e.labOpts()); err != nil {
					return errors.Join(err, lab.Down(context.WithoutCancel(cmd.Context()), rec.Name, e.labOpts()))
				}
			} else if err := startLabFlows(cmd.OutOrStdout(), rec, net, e.labOpts()); err != nil {
				return errors.Join(err, lab.Down(context.WithoutCancel(cmd.Context()), rec.Name, e.labOpts()))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "lab %s up: %d nodes, %d links\n", rec.Name, len(rec.Namespaces), len(rec.Links))
			fmt.Fprintf(cmd.OutOrStdout(), "  srchain lab status %s\n  srchain lab exec %s NODE -- CMD...\n  srchain lab down %s\n", rec.Name, rec.Name, rec.Name)
			return nil
		},
	}
	upCmd.Flags().BoolVar(&agents, "agents", false, "apply through srchain serve and one srchain agent process per node")
	labCmd.AddCommand(upCmd)

	labCmd.AddCommand(&cobra.Command{
		Use:   "down NAME|FILE",
		Short: "Remove a lab and everything it made",
		Long: "down removes everything the lab's record names (processes it started, BPF pins,\n" +
			"namespaces and their veths), then the record. Without a record it still removes\n" +
			"the src-<lab>_* namespaces no other lab's record claims. A lab that is already\n" +
			"gone is not an error: down says so and succeeds.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := labName(args[0])
			if err != nil {
				return err
			}
			err = lab.Down(cmd.Context(), name, e.labOpts())
			if errors.Is(err, lab.ErrNotFound) {
				// Down after a crash or a partial cleanup is normal:
				// nothing left is the state asked for.
				fmt.Fprintf(cmd.OutOrStdout(), "lab %s: no such lab, nothing to remove\n", name)
				return nil
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "lab %s down\n", name)
			return nil
		},
	})

	var asJSON bool
	status := &cobra.Command{
		Use:   "status [NAME|FILE]",
		Short: "Compare every node of a lab with its desired state (no NAME: list labs)",
		Long: "status NAME compares every node of the lab with its desired state and exits\n" +
			"non-zero if one differs. Without NAME it lists the labs, one name a line, or\n" +
			"says \"no labs\" (on stderr) when there are none.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				names, err := lab.List(e.labOpts())
				if err != nil {
					return err
				}
				if len(names) == 0 {
					fmt.Fprintln(cmd.ErrOrStderr(), "no labs")
				}
				for _, n := range names {
					fmt.Fprintln(cmd.OutOrStdout(), n)
				}
				return nil
			}
			name, err := labName(args[0])
			if err != nil {
				return err
			}
			sts, err := lab.Status(cmd.Context(), name, e.labOpts())
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(sts); err != nil {
					return err
				}
			} else {
				lab.PrintStatus(cmd.OutOrStdout(), sts)
			}
			for _, s := range sts {
				if !s.OK() {
					return fmt.Errorf("lab %s: node %s is not as desired", name, s.Node)
				}
			}
			return nil
		},
	}
	status.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	labCmd.AddCommand(status)

	execCmd := &cobra.Command{
		Use:   "exec NAME NODE [--] CMD [ARG...]",
		Short: "Run a command inside a node's namespace",
		Long: "exec runs CMD with its arguments inside NODE's namespace and exits with its status.\n" +
			"Everything after NODE belongs to CMD, flags included, so `--` is optional:\n" +
			"`lab exec quickstart h1 ip -br a` and `lab exec quickstart h1 -- ip -br a` are the\n" +
			"same. srchain's own flags (--state-dir) go before NAME.",
		Example: "  srchain lab exec quickstart h1 ping -c1 10.0.4.2\n" +
			"  srchain lab exec quickstart r1 -- ip -6 route",
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			// Flag parsing stops at NAME, so a `--` after NODE arrives
			// as an argument.
			if len(args) > 2 && args[2] == "--" {
				args = append(args[:2:2], args[3:]...)
			}
			if len(args) < 3 {
				return fmt.Errorf("usage: srchain lab exec NAME NODE [--] CMD [ARG...]: no command")
			}
			name, err := labName(args[0])
			if err != nil {
				return err
			}
			err = lab.Exec(cmd.Context(), name, args[1], args[2:], lab.Stdio{In: e.stdin, Out: e.stdout, Err: e.stderr}, e.labOpts())
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				// Pass the command's status through, without a message.
				return exitCode(ee.ExitCode())
			}
			return err
		},
	}
	// Stop at the first argument (NAME): CMD's flags are CMD's.
	execCmd.Flags().SetInterspersed(false)
	labCmd.AddCommand(execCmd, newLabApplyCmd(e), newLabTraceCmd(e), newLabCountersCmd(e), newLabEventsCmd(e), newLabFlowsCmd(e), newLabRotateCmd(e))
	return labCmd
}
