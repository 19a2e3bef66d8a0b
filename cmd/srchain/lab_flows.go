package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/srchain/srchain/internal/flowsetup"
	"github.com/srchain/srchain/internal/lab"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/state"
)

// newLabFlowsCmd is `srchain lab flows LAB`: the per-flow setup loops
// (internal/flowsetup) of a lab applied without agents. `lab up` starts
// it as a process of the lab when a chain has an NF pool (`lab down`
// stops it); agents run the same loop themselves.
func newLabFlowsCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "flows LAB",
		Short: "Run the per-flow setup loops of a lab's NF pools (started by lab up)",
		Long: "flows runs, for every node of LAB whose eBPF ingress has a chain with an NF\n" +
			"pool, the loop that places each new flow on an instance, installs the flow's\n" +
			"entry and sends its first packet on (docs/controller.md \"Per-flow setup\").\n" +
			"It follows `lab apply` and runs until interrupted; `lab up` starts it.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLabFlows(cmd.Context(), args[0], e.labOpts(), slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil)))
		},
	}
}

// needsFlows reports whether a node of net has an NF pool.
func needsFlows(net *state.Network) bool {
	for _, n := range net.Nodes {
		if _, ok := flowsetup.PoolConfig(n); ok {
			return true
		}
	}
	return false
}

// runLabFlows keeps a flow-setup loop per node of the lab's recorded
// state (read again every second, so `lab apply` is followed) until ctx
// ends.
func runLabFlows(ctx context.Context, name string, opts lab.Options, log *slog.Logger) error {
	type node struct {
		ns *netns.NS
		r  *flowsetup.Runner
	}
	nodes := map[string]*node{}
	defer func() {
		for _, n := range nodes {
			n.r.Stop()
			n.ns.Close()
		}
	}()
	for {
		rec, err := lab.Load(name, opts)
		if err != nil {
			return fmt.Errorf("lab flows: %w", err)
		}
		if rec.Network != nil {
			for _, sn := range rec.Network.Nodes {
				if _, ok := flowsetup.PoolConfig(sn); !ok && nodes[sn.Name] == nil {
					continue
				}
				n := nodes[sn.Name]
				if n == nil {
					ns, err := lab.Open(name, sn.Name, opts)
					if err != nil {
						return fmt.Errorf("lab flows: %w", err)
					}
					n = &node{ns: ns, r: &flowsetup.Runner{NS: ns, Log: log.With("node", sn.Name)}}
					nodes[sn.Name] = n
				}
				if err := n.r.Set(ctx, sn); err != nil {
					log.Error("lab flows", "node", sn.Name, "err", err)
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// startLabFlows starts `srchain lab flows` as a process of the lab when
// its state has an NF pool; its output goes to <state-dir>/<lab>.flows.log.
func startLabFlows(out io.Writer, rec *lab.Record, net *state.Network, opts lab.Options) error {
	if !needsFlows(net) {
		return nil
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("start flow setup: find the srchain binary: %w", err)
	}
	dir := opts.StateDir
	if dir == "" {
		dir = lab.DefaultStateDir
	}
	logPath := filepath.Join(dir, rec.Name+".flows.log")
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("start flow setup: %w", err)
	}
	defer lf.Close()
	args := []string{"lab", "flows", rec.Name}
	if opts.StateDir != "" {
		args = append(args, "--state-dir", opts.StateDir)
	}
	cmd := exec.Command(self, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start flow setup: %w", err)
	}
	err = lab.AddPID(rec.Name, cmd.Process.Pid, opts)
	_ = cmd.Process.Release()
	if err == nil {
		fmt.Fprintf(out, "  per-flow setup: srchain lab flows %s (log %s)\n", rec.Name, logPath)
	}
	return err
}
