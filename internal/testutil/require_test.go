package testutil

import (
	"os"
	"os/exec"
	"testing"
)

// TestStrictFails runs a child test that lacks a tool, once relaxed and
// once strict, and checks that only the strict run fails.
func TestStrictFails(t *testing.T) {
	if os.Getenv("SRCHAIN_TESTUTIL_CHILD") == "1" {
		RequireTool(t, "srchain-no-such-tool")
		return
	}
	for _, tc := range []struct {
		strict string
		fail   bool
	}{{"0", false}, {"1", true}} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestStrictFails$", "-test.v")
		cmd.Env = append(os.Environ(), "SRCHAIN_TESTUTIL_CHILD=1", StrictEnv+"="+tc.strict)
		out, err := cmd.CombinedOutput()
		if failed := err != nil; failed != tc.fail {
			t.Errorf("strict=%s: failed=%v, want %v\n%s", tc.strict, failed, tc.fail, out)
		}
	}
}
