package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/srchain/srchain/internal/lab"
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
			return lab.RunFlows(cmd.Context(), args[0], e.labOpts(), slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil)))
		},
	}
}

// startLabFlows starts `srchain lab flows` as a process of the lab when
// its state has an NF pool; its output goes to <state-dir>/<lab>.flows.log.
func startLabFlows(out io.Writer, rec *lab.Record, net *state.Network, opts lab.Options) error {
	if !lab.NeedsFlows(net) {
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
