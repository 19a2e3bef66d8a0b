package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/srchain/srchain/internal/lab"
	"github.com/srchain/srchain/internal/spec"
)

var errProbesFailed = errors.New("probes failed")

func newDemoCmd(e *env) *cobra.Command {
	var keep, brief bool
	cmd := &cobra.Command{
		Use:   "demo [FILE]",
		Short: "Deploy a spec in a lab, send its traffic probes and show the path each took",
		Long: "demo validates and compiles FILE (default examples/quickstart.yaml), builds it as a\n" +
			"lab, traces every node, sends each probe of the spec's traffic: section and prints the\n" +
			"nodes that saw it in order, with the SRH's segments left (SL) and the destination (DA)\n" +
			"on arrival, then every frame of it each node saw. A probe passes when it reached its\n" +
			"destination and, if it expects a chain, every NF SID of that chain was served in order\n" +
			"by the node that owns it (or, for expect: none, it never carried an SRH). Served SIDs\n" +
			"are read from the SRH's segments left as the packet goes, so SIDs a node runs locally\n" +
			"(an NF on the ingress, several NFs on one node) count. The lab is removed at the end\n" +
			"unless --keep. " +
			"Exits non-zero if any probe failed.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			file := "examples/quickstart.yaml"
			if len(args) == 1 {
				file = args[0]
			}
			s, net, err := loadAndCompile(file)
			if err != nil {
				return specProblems(cmd, err)
			}
			if len(s.Traffic) == 0 {
				return fmt.Errorf("demo %s: the spec has no traffic: section to send", file)
			}
			out := cmd.OutOrStdout()
			ctx := cmd.Context()
			fmt.Fprintf(out, "== lab %s: %d nodes, %d links\n", net.Name, len(net.Nodes), len(net.Links))
			if _, err := lab.Up(ctx, net, lab.UpOptions{Options: e.labOpts(), Source: file}); err != nil {
				if errors.Is(err, lab.ErrExists) {
					// Never tear down a lab the demo did not create.
					return fmt.Errorf("demo %s: a lab named %s is already running (an earlier `demo --keep` or a `lab up`); "+
						"the demo does not remove labs it did not create: check `srchain lab status %s`, then `srchain lab down %s` if it is yours: %w",
						file, net.Name, net.Name, net.Name, err)
				}
				return err
			}
			if !keep {
				defer func() {
					if err := lab.Down(context.WithoutCancel(ctx), net.Name, e.labOpts()); err != nil {
						fmt.Fprintln(cmd.ErrOrStderr(), "srchain: demo:", err)
					}
				}()
			}
			if lab.NeedsFlows(net) {
				// The per-flow setup loops of the lab's NF pools, for
				// as long as the probes run.
				fctx, stop := context.WithCancel(ctx)
				flowsDone := make(chan error, 1)
				go func() {
					flowsDone <- lab.RunFlows(fctx, net.Name, e.labOpts(), slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil)))
				}()
				defer func() {
					stop()
					if err := <-flowsDone; err != nil {
						fmt.Fprintln(cmd.ErrOrStderr(), "srchain: demo:", err)
					}
				}()
			}
			pr, err := lab.NewProber(net.Name, e.labOpts())
			if err != nil {
				return err
			}
			defer pr.Close()
			fmt.Fprintf(out, "== probes (tracing %d nodes)\n", len(pr.Nodes()))
			failed := 0
			for _, t := range s.Traffic {
				res, err := pr.Run(ctx, probeFromSpec(t))
				if err != nil {
					return err
				}
				pr.Print(out, res, !brief)
				if !res.OK {
					failed++
				}
			}
			fmt.Fprintf(out, "== %d/%d probes OK\n", len(s.Traffic)-failed, len(s.Traffic))
			// What the programs concluded (e.g. OPoT: packets verified
			// and dropped per chain at its verifier).
			sums, err := lab.Summaries(ctx, net.Name, e.labOpts())
			for _, l := range sums {
				fmt.Fprintln(out, "== "+l)
			}
			if err != nil {
				return err
			}
			if keep {
				fmt.Fprintf(out, "lab kept: srchain lab status %s; srchain lab down %s\n", net.Name, net.Name)
			}
			if failed > 0 {
				return fmt.Errorf("demo %s: %d of %d: %w", file, failed, len(s.Traffic), errProbesFailed)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&keep, "keep", false, "leave the lab running afterwards")
	cmd.Flags().BoolVar(&brief, "brief", false, "print only one line per probe")
	cmd.Flags().StringVar(&e.stateDir, "state-dir", "", "lab records directory (default "+lab.DefaultStateDir+")")
	return cmd
}

func probeFromSpec(t spec.Probe) lab.Probe {
	return lab.Probe{Name: t.Name, From: t.From, To: t.To, Proto: t.Proto, DPort: t.DPort, Expect: t.Expect}
}
