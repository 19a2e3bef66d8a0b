// Command srchain deploys and runs SRv6 service function chains on Linux.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// SIGINT/SIGTERM cancel the commands' context with a stopSignal
	// cause: the planned way to stop serve and agent (exit status 0).
	// SIGPIPE is NOT notified here: Go's default then ignores it for
	// every fd but stdout/stderr, so a client or etcd closing a socket
	// never ends a long-running process (issue 38, item 1). Only the
	// commands that build labs (demo, lab) divert it, see pipeCancels.
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		// Later signals stay caught (as with signal.NotifyContext): a
		// second ^C must not cut a lab's teardown short.
		cancel(stopSignal{<-sigs})
	}()
	e := &env{ctx: ctx, stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, configDir: DefaultConfigDir}
	code := run(e, os.Args[1:])
	cancel(nil)
	os.Exit(code)
}
