package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/srchain/srchain/internal/lab"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/trace"
)

func newLabTraceCmd(e *env) *cobra.Command {
	var nodes []string
	var srhOnly bool
	var duration time.Duration
	cmd := &cobra.Command{
		Use:   "trace NAME|FILE",
		Short: "Print every frame the lab's nodes see, with SRH fields, until Ctrl-C",
		Long: "trace opens a capture in every node of the lab (or only --node) and prints each\n" +
			"frame: time, node, interface, direction, outer addresses, SRH segments left and\n" +
			"segment list (travel order), inner addresses and protocol. Frames are printed in\n" +
			"kernel timestamp order, a fraction of a second after they were seen.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := labName(args[0])
			if err != nil {
				return err
			}
			rec, err := lab.Load(name, e.labOpts())
			if err != nil {
				return err
			}
			nss := map[string]*netns.NS{}
			defer func() {
				for _, ns := range nss {
					ns.Close()
				}
			}()
			for node := range rec.Namespaces {
				if len(nodes) > 0 && !slices.Contains(nodes, node) {
					continue
				}
				ns, err := lab.Open(name, node, e.labOpts())
				if err != nil {
					return err
				}
				nss[node] = ns
			}
			if len(nss) == 0 {
				return fmt.Errorf("trace %s: no node matches %v: %w", name, nodes, lab.ErrNoNode)
			}
			c, err := trace.Start(nss)
			if err != nil {
				return err
			}
			defer c.Stop()
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			var end <-chan time.Time
			if duration > 0 {
				end = time.After(duration)
			}
			tick := time.NewTicker(200 * time.Millisecond)
			defer tick.Stop()
			out := cmd.OutOrStdout()
			for {
				select {
				case <-ctx.Done():
					return nil
				case <-end:
					cancel()
				case <-tick.C:
				}
				for _, ev := range c.Drain() {
					if srhOnly && !ev.HasSRH {
						continue
					}
					fmt.Fprintf(out, "%s %s\n", ev.Time.Format("15:04:05.000000"), ev)
				}
			}
		},
	}
	cmd.Flags().StringSliceVar(&nodes, "node", nil, "trace only these nodes (repeat or comma-separate)")
	cmd.Flags().BoolVar(&srhOnly, "srh", false, "print only frames carrying an SRH")
	cmd.Flags().DurationVar(&duration, "duration", 0, "stop after this long (default: until Ctrl-C)")
	return cmd
}
