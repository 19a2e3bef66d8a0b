package main

import (
	"strings"
	"testing"
)

func TestLabCLIErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"lab", "status", "--state-dir", dir, "nosuch"}, "no such lab"},
		{[]string{"lab", "exec", "--state-dir", dir, "nosuch", "h1", "--", "true"}, "no such lab"},
		// CMD's flags are CMD's, with or without `--`.
		{[]string{"lab", "exec", "--state-dir", dir, "nosuch", "h1", "ip", "-br", "a"}, "no such lab"},
		{[]string{"lab", "exec", "--state-dir", dir, "nosuch", "h1", "ping", "--help"}, "no such lab"},
		{[]string{"lab", "exec", "--state-dir", dir, "nosuch", "h1", "--"}, "no command"},
		{[]string{"lab", "status", "--state-dir", dir, "../x"}, "bad lab or node name"},
		{[]string{"lab", "trace", "--state-dir", dir, "nosuch"}, "no such lab"},
		{[]string{"lab", "up", "--state-dir", dir, "/nonexistent.yaml"}, "read spec /nonexistent.yaml"},
		{[]string{"demo", "--state-dir", dir, "/nonexistent.yaml"}, "read spec /nonexistent.yaml"},
	} {
		out, errOut, err := runCLI(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("srchain %s: error %v, want %q (output %q %q)", strings.Join(c.args, " "), err, c.want, out, errOut)
		}
	}
	// No labs: said on stderr, so that stdout stays a list of names.
	out, errOut, err := runCLI(t, "lab", "status", "--state-dir", dir)
	if err != nil || out != "" || errOut != "no labs\n" {
		t.Errorf("lab status with no labs = %q %q, %v", out, errOut, err)
	}
	// Down of a lab that is gone succeeds and says so (idempotent).
	for i := 0; i < 2; i++ {
		out, _, err = runCLI(t, "lab", "down", "--state-dir", dir, "nosuch")
		if err != nil || !strings.Contains(out, "lab nosuch: no such lab, nothing to remove") {
			t.Errorf("lab down nosuch = %q, %v", out, err)
		}
	}
	// A bad name is still an error.
	if _, _, err := runCLI(t, "lab", "down", "--state-dir", dir, "../x"); err == nil || !strings.Contains(err.Error(), "bad lab or node name") {
		t.Errorf("lab down ../x: %v", err)
	}
}

// TestLabExecArgs: everything after NAME is left to exec, flags included.
func TestLabExecArgs(t *testing.T) {
	sub, _, err := newLabCmd(&env{}).Find([]string{"exec"})
	if err != nil || sub.Name() != "exec" {
		t.Fatalf("find exec: %v", err)
	}
	if err := sub.ParseFlags([]string{"q", "h1", "ip", "-br", "a"}); err != nil {
		t.Fatalf("parse exec q h1 ip -br a: %v", err)
	}
	if got := strings.Join(sub.Flags().Args(), " "); got != "q h1 ip -br a" {
		t.Errorf("exec args = %q", got)
	}
}
