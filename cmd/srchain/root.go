package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

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

	// --log-format, --log-level, --config; configDir holds the commands'
	// default config files (main: DefaultConfigDir; tests: "", none).
	logFormat, logLevel   string
	configFile, configDir string

	// stopPipe undoes pipeCancels (nil when it did nothing).
	stopPipe func()
}

// stopSignal is the cause main cancels the context with on SIGINT or
// SIGTERM: a planned stop. Any other end of a long-running command's
// context is unplanned and gives a non-zero exit status (plannedStop).
type stopSignal struct{ sig os.Signal }

func (s stopSignal) Error() string { return s.sig.String() + " received" }

// plannedStop reports whether ctx ended the way an operator stops a
// process: SIGINT/SIGTERM (main), or a plain cancel (tests, callers
// embedding a command). A deadline, or any other cause, is not.
func plannedStop(ctx context.Context) bool {
	cause := context.Cause(ctx)
	var s stopSignal
	return errors.As(cause, &s) || cause == context.Canceled
}

// pipeCancels makes SIGPIPE cancel cmd's context, for the commands that
// build labs (demo, lab): `srchain demo | head` must still tear its lab
// down when head quits, and Go's default for a write to a closed stdout
// is to die on the spot. The long-running commands (serve, agent) never
// get this: with SIGPIPE notified, a write to ANY closed socket raises it
// (os/signal: "the file descriptor number does not matter"), and one
// client that hangs up would stop the controller (issue 38, item 1).
func pipeCancels(e *env, cmd *cobra.Command) {
	path := cmd.CommandPath()
	if !strings.HasPrefix(path+" ", "srchain demo ") && !strings.HasPrefix(path+" ", "srchain lab ") {
		return
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGPIPE)
	cmd.SetContext(ctx)
	e.stopPipe = stop
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
		Version:       versionString(),
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			// The config file first: it may set the log flags.
			if err := e.loadConfig(cmd); err != nil {
				return err
			}
			logger, err := newLogger(e.stderr, e.logFormat, e.logLevel, e.verbose)
			if err != nil {
				return err
			}
			slog.SetDefault(logger)
			pipeCancels(e, cmd)
			return nil
		},
	}
	root.SetVersionTemplate("srchain {{.Version}}\n")
	pf := root.PersistentFlags()
	pf.BoolVarP(&e.verbose, "verbose", "v", false, "log debug detail (same as --log-level debug)")
	pf.StringVar(&e.logFormat, "log-format", "text", "log format on stderr: text or json")
	pf.StringVar(&e.logLevel, "log-level", "info", "least severe level logged: debug, info, warn or error")
	pf.StringVar(&e.configFile, "config", "", "read flag values from this YAML file, keys = long flag names; command-line flags win (agent, serve: default "+DefaultConfigDir+"/COMMAND.yaml if it exists)")
	root.AddCommand(newLabCmd(e), newCertsCmd(), newDemoCmd(e), newPlanCmd(e), newValidateCmd(e), newSchemaCmd(e),
		newFirewallCmd(e), newBenchCmd(e), newVersionCmd(e), newServeCmd(e), newApplyCmd(e), newGetCmd(e), newDeleteCmd(e), newRotateCmd(e),
		newAgentCmd(e), newNodeCmd(e))
	root.AddCommand(newGenManCmd()) // hidden: scripts/deb.sh's man pages
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
	if e.stopPipe != nil {
		e.stopPipe()
	}
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
