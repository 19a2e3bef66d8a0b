package main

import (
	"strings"
	"testing"
)

// TestAgentFlags: `srchain agent` refuses to start without a node, with
// a namespace that does not exist, or with a lease etcd would not keep.
func TestAgentFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"agent"}, `required flag(s) "node" not set`},
		{[]string{"agent", "--node", "a/b"}, "bad node name"},
		{[]string{"agent", "--node", "r1", "--netns", "srchain-no-such-ns", "--state-dir", ""}, "srchain-no-such-ns"},
		{[]string{"agent", "--node", "r1", "--lease-ttl", "1s", "--state-dir", "", "--etcd-endpoints", "http://127.0.0.1:1"}, "minimum of 2s"},
	} {
		_, _, err := runCLI(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error with %q", c.args, err, c.want)
		}
	}
}
