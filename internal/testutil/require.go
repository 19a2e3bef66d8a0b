// Package testutil holds helpers shared by srchain's tests.
//
// Require* skip a test whose precondition is missing on a developer's
// machine, but fail it when SRCHAIN_TEST_STRICT=1 (set by scripts/test.sh
// and so by CI): there, a missing tool or privilege is a broken set-up,
// not a reason to pass silently.
package testutil

import (
	"os"
	"os/exec"
	"testing"
)

// StrictEnv is the environment variable that turns skips into failures.
const StrictEnv = "SRCHAIN_TEST_STRICT"

// Strict reports whether missing preconditions must fail tests.
func Strict() bool { return os.Getenv(StrictEnv) == "1" }

// Unavailable skips t (or fails it in strict mode) with the reason.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if Strict() {
		t.Fatalf("precondition missing ("+StrictEnv+"=1): "+format, args...)
	}
	t.Skipf(format, args...)
}

// RequireRoot needs euid 0 (namespaces, BPF, netfilter).
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		Unavailable(t, "needs root")
	}
}

// RequireTool needs an executable on PATH (or at an absolute path) and
// returns its path.
func RequireTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Unavailable(t, "needs %s: %v", name, err)
	}
	return p
}

// RequireKernel needs a kernel feature; err is what probing it returned
// (nil: present). Use it only where the feature can truly be absent.
func RequireKernel(t testing.TB, feature string, err error) {
	t.Helper()
	if err != nil {
		Unavailable(t, "kernel lacks %s: %v", feature, err)
	}
}
