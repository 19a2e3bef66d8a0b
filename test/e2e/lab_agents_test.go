package e2e

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/srchain/srchain/internal/lab"
	"github.com/srchain/srchain/internal/netns"
)

// TestLabAgents: `lab up --agents` applies the lab through the
// distributed path (srchain serve, the API, etcd, one srchain agent
// process per node): the quickstart's probes pass, every node is as
// desired, and `lab down` stops every process it started and removes the
// namespaces.
func TestLabAgents(t *testing.T) {
	requireRoot(t)
	if srchainBin == "" {
		t.Fatal("srchain binary not built (see the TestMain output)")
	}
	file := renamedSpec(t, "quickstart.yaml", "a")
	name := labName("a")
	opts := lab.Options{StateDir: t.TempDir()}
	cleanupCLILab(t, name, opts.StateDir)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, srchainBin, "lab", "up", "--agents", "--state-dir", opts.StateDir, file).CombinedOutput()
	if err != nil {
		t.Fatalf("lab up --agents: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "agents in sync") || !strings.Contains(string(out), "mutual TLS") {
		t.Errorf("lab up --agents output:\n%s", out)
	}
	rec, err := lab.Load(name, opts)
	if err != nil {
		t.Fatal(err)
	}
	// serve and one agent per node.
	if len(rec.Procs) != 1+len(rec.Namespaces) {
		t.Fatalf("%d processes recorded, want %d", len(rec.Procs), 1+len(rec.Namespaces))
	}
	for _, p := range rec.Procs {
		if !running(p.PID) {
			t.Errorf("recorded process %d is not running", p.PID)
		}
	}
	sts, err := lab.Status(ctx, name, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sts {
		if !s.OK() {
			t.Errorf("node %s: %s", s.Node, strings.Join(s.Problems, "; "))
		}
	}
	pr, err := lab.NewProber(name, opts)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := example(t, "quickstart.yaml", "a")
	for _, p := range probes(s) {
		if res, out := run(t, pr, p); !res.OK {
			t.Errorf("probe %s:\n%s", p.Name, out)
		}
	}
	pr.Close()

	if out, err := exec.CommandContext(ctx, srchainBin, "lab", "down", "--state-dir", opts.StateDir, name).CombinedOutput(); err != nil {
		t.Fatalf("lab down: %v\n%s", err, out)
	}
	for _, p := range rec.Procs {
		if running(p.PID) {
			t.Errorf("process %d still running after lab down", p.PID)
		}
	}
	if left, _ := netns.List(lab.NSName(name, "")); len(left) != 0 {
		t.Errorf("namespaces left: %v", left)
	}
	if _, err := os.Stat(lab.AgentsDir(opts, name)); !os.IsNotExist(err) {
		t.Errorf("agents directory left: %v", err)
	}
}

// running reports whether pid is a live process (not gone, not a zombie).
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && !strings.HasPrefix(s[i:], ") Z")
}
