package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/srchain/srchain/internal/agent"
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

// TestAgentSurvives: an agent whose state file is truncated and whose
// etcd does not answer keeps running (it logs, retries with backoff, and
// would reconcile against the node once etcd answers) until it is
// stopped, and a stop is a clean exit: before issue 38 it exited at
// once, status 1, on the truncated file.
func TestAgentSurvives(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "r1.json"), []byte(`{"version":3,"base":{"na`), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runAgent(ctx, agentOptions{node: "r1", stateDir: dir, etcdEndpoints: []string{"http://127.0.0.1:1"},
			ttl: agent.DefaultTTL, resync: agent.DefaultResync})
	}()
	select {
	case err := <-done:
		t.Fatalf("agent ended on its own: %v", err)
	case <-time.After(1500 * time.Millisecond):
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("agent stopped: %v, want a clean exit", err)
	}
}
