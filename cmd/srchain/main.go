// Command srchain deploys and runs SRv6 service function chains on Linux.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// SIGINT/SIGTERM cancel the commands' context. SIGPIPE (output piped
	// into a pager or head that quit) cancels too instead of killing the
	// process, so that the demo still removes its lab.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(&env{ctx: ctx, stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr}, os.Args[1:])
	stop()
	os.Exit(code)
}
