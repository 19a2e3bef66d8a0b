package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/srchain/srchain/internal/lab"
)

// env is what every command runs in: its standard streams and a context
// that main cancels on SIGINT and SIGTERM (so a half-built lab is still
// torn down by Up's own cleanup). Commands take it instead of reaching for
// os.Stdout or package globals, as cloudflare/tubular's cmd/tubectl does,
// so tests run them with buffers and a context of their own.
type env struct {
	ctx    context.Context
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer

	// Flags shared by several commands.
	verbose  bool
	stateDir string // --state-dir of lab and demo ("": lab.DefaultStateDir)
}

func (e *env) labOpts() lab.Options { return lab.Options{StateDir: e.stateDir} }

// exitCode is an error that only carries the process's exit status
// (`lab exec` passes its command's through, without a message).
type exitCode int

func (c exitCode) Error() string { return fmt.Sprintf("exit status %d", int(c)) }

// newRootCmd builds the command tree for one run in e.
func newRootCmd(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:           "srchain",
		Short:         "SRv6 service function chaining for stock Linux",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(cmd *cobra.Command, args []string) {
			level := slog.LevelInfo
			if e.verbose {
				level = slog.LevelDebug
			}
			slog.SetDefault(slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level})))
		},
	}
	root.PersistentFlags().BoolVarP(&e.verbose, "verbose", "v", false, "log debug detail")
	root.AddCommand(newLabCmd(e), newCertsCmd(), newDemoCmd(e), newPlanCmd(e), newValidateCmd(e), newSchemaCmd(e),
		newFirewallCmd(e), newBenchCmd(e), newVersionCmd(e), newServeCmd(e), newApplyCmd(e), newGetCmd(e), newDeleteCmd(e), newRotateCmd(e),
		newAgentCmd(e))
	root.SetIn(e.stdin)
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	return root
}

// run executes the CLI with args in e and returns the exit status.
func run(e *env, args []string) int {
	root := newRootCmd(e)
	root.SetArgs(args)
	err := root.ExecuteContext(e.ctx)
	var code exitCode
	switch {
	case err == nil:
		return 0
	case errors.As(err, &code):
		return int(code)
	default:
		fmt.Fprintln(e.stderr, "srchain:", err)
		return 1
	}
}
