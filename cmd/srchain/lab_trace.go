package main

import (
	"context"
	"fmt"
	"os"
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
	var pcapFile string
	cmd := &cobra.Command{
		Use:   "trace NAME|FILE",
		Short: "Print every frame the lab's nodes see, with SRH fields, until Ctrl-C",
		Long: "trace opens a capture in every node of the lab (or only --node) and prints each\n" +
			"frame: time, node, interface, direction, outer addresses, SRH segments left and\n" +
			"segment list (travel order), inner addresses and protocol. Frames are printed in\n" +
			"kernel timestamp order, a fraction of a second after they were seen.\n" +
			"With -w FILE every frame is also written to FILE as pcapng (Wireshark, tcpdump\n" +
			"-r), one interface per node and interface, named NODE:IFACE.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
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
			var pw *trace.PcapWriter
			if pcapFile != "" {
				f, err := os.Create(pcapFile)
				if err != nil {
					return fmt.Errorf("trace %s: %w", name, err)
				}
				defer f.Close()
				pw = trace.NewPcapWriter(f)
				defer func() {
					if ferr := pw.Flush(); ferr != nil && err == nil {
						err = ferr
					}
				}()
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
			for done := false; !done; {
				select {
				case <-ctx.Done():
					// What the rings still hold is printed (and written) too.
					c.Flush(time.Second)
					done = true
				case <-end:
					cancel()
					continue
				case <-tick.C:
				}
				for _, ev := range c.Drain() {
					if srhOnly && !ev.HasSRH {
						continue
					}
					if pw != nil {
						if err := pw.Write(ev); err != nil {
							return err
						}
					}
					fmt.Fprintf(out, "%s %s\n", ev.Time.Format("15:04:05.000000"), ev)
				}
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&nodes, "node", nil, "trace only these nodes (repeat or comma-separate)")
	cmd.Flags().BoolVar(&srhOnly, "srh", false, "print only frames carrying an SRH")
	cmd.Flags().DurationVar(&duration, "duration", 0, "stop after this long (default: until Ctrl-C)")
	cmd.Flags().StringVarP(&pcapFile, "write", "w", "", "also write every frame to this pcapng file")
	return cmd
}
