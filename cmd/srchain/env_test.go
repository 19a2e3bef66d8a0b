package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testEnv is an environment with buffers for streams.
func testEnv(ctx context.Context) (*env, *bytes.Buffer, *bytes.Buffer) {
	var out, errOut bytes.Buffer
	return &env{ctx: ctx, stdin: strings.NewReader(""), stdout: &out, stderr: &errOut}, &out, &errOut
}

// runCLI runs the CLI with args in a fresh environment and returns
// stdout, stderr and the command's error.
func runCLI(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	e, out, errOut := testEnv(context.Background())
	root := newRootCmd(e)
	root.SetArgs(args)
	err := root.ExecuteContext(e.ctx)
	return out.String(), errOut.String(), err
}

// TestRunEnv: run writes only to its environment's streams and turns an
// error into status 1 with one "srchain:" line on stderr.
func TestRunEnv(t *testing.T) {
	e, out, errOut := testEnv(context.Background())
	if code := run(e, []string{"version"}); code != 0 || !strings.HasPrefix(out.String(), "srchain ") || errOut.Len() != 0 {
		t.Errorf("version: status %d, out %q, err %q", code, out, errOut)
	}
	e, out, errOut = testEnv(context.Background())
	if code := run(e, []string{"lab", "status", "--state-dir", t.TempDir(), "nosuch"}); code != 1 || out.Len() != 0 ||
		!strings.HasPrefix(errOut.String(), "srchain: ") || !strings.Contains(errOut.String(), "no such lab") {
		t.Errorf("lab status nosuch: status %d, out %q, err %q", code, out, errOut)
	}
}

// TestRunsShareNoFlags: --state-dir was a package global, so a second
// command run in the same process (a test, an agent) kept the first
// one's directory. Each run now has its own environment.
func TestRunsShareNoFlags(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "zz-only-here.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCLI(t, "lab", "status", "--state-dir", dir)
	if err != nil || out != "zz-only-here\n" {
		t.Fatalf("lab status --state-dir: %q, %v", out, err)
	}
	// Without the flag: the default directory, never dir.
	out, _, _ = runCLI(t, "lab", "status")
	if strings.Contains(out, "zz-only-here") {
		t.Errorf("second run used the first run's --state-dir: %q", out)
	}
}

// TestCommandContext: commands get the environment's context (cancelled
// by main on SIGINT/SIGTERM): with it cancelled, bench control stops
// before it builds anything.
func TestCommandContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	e, _, _ := testEnv(ctx)
	root := newRootCmd(e)
	root.SetArgs([]string{"bench", "control", "--chains", "1", "--rounds", "1", "--state-dir", t.TempDir()})
	err := root.ExecuteContext(ctx)
	if err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Errorf("bench control with a cancelled context: %v", err)
	}
}
