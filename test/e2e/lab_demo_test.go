package e2e

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/srchain/srchain/internal/lab"
	"github.com/srchain/srchain/internal/netns"
)

// TestDemoCLI runs `srchain demo` as the README does: it must pass on the
// quickstart, print a path per probe, remove its lab, and exit non-zero
// when a probe's expectation is wrong.
func TestDemoCLI(t *testing.T) {
	requireRoot(t)
	if srchainBin == "" {
		t.Fatal("srchain binary not built (see the TestMain output)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	name := labName("d")
	t.Cleanup(func() {
		left, _ := netns.List(name)
		for _, n := range left {
			_ = netns.Delete(n)
		}
	})
	file := renamedSpec(t, "quickstart.yaml", "d")
	out, err := exec.CommandContext(ctx, srchainBin, "demo", "--state-dir", dir, file).CombinedOutput()
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	for _, want := range []string{
		"v4: h1 -> r1 [H.Encaps] -> r2 SL=1 DA=fc00:2::1:0 [End fw] -> r3 SL=0 DA=fc00:3::1:0 [End.DX4] -> h2  OK (chain web4)",
		"v6: h1 -> r1 [H.Encaps] -> r2 SL=1 DA=fc00:2::1:0 [End fw] -> r3 SL=0 DA=fc00:3::2:0 [End.DT6] -> h2  OK (chain web6)",
		"OK (not steered)",
		"== 3/3 probes OK",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	if left, _ := netns.List(lab.NSName(name, "")); len(left) != 0 {
		t.Errorf("demo left namespaces: %v", left)
	}

	// A wrong expectation fails the demo.
	b, _ := os.ReadFile(file)
	bad := strings.Replace(string(b), "expect: web6", "expect: none", 1)
	if err := os.WriteFile(file, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = exec.CommandContext(ctx, srchainBin, "demo", "--brief", "--state-dir", dir, file).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "FAIL") || !strings.Contains(string(out), "== 2/3 probes OK") {
		t.Errorf("demo with a wrong expectation: %v\n%s", err, out)
	}
	if left, _ := netns.List(lab.NSName(name, "")); len(left) != 0 {
		t.Errorf("failed demo left namespaces: %v", left)
	}
}

// TestDemoScriptSparesRunningLab: scripts/demo.sh SPEC first ran
// `lab down SPEC` with its output discarded, silently removing someone's
// running lab of the same name. It must fail with a clear message and
// leave that lab running.
func TestDemoScriptSparesRunningLab(t *testing.T) {
	requireRoot(t)
	if srchainBin == "" {
		t.Fatal("srchain binary not built (see the TestMain output)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	file := renamedSpec(t, "quickstart.yaml", "s")
	name := labName("s")
	// The default state dir: the one demo.sh's srchain uses.
	t.Cleanup(func() {
		_ = exec.Command(srchainBin, "lab", "down", name).Run()
		left, _ := netns.List(lab.NSName(name, ""))
		for _, n := range left {
			_ = netns.Delete(n)
		}
	})
	if out, err := exec.CommandContext(ctx, srchainBin, "lab", "up", file).CombinedOutput(); err != nil {
		t.Fatalf("lab up: %v\n%s", err, out)
	}
	script := exec.CommandContext(ctx, "scripts/demo.sh", file, "--brief")
	script.Dir = "../.."
	out, err := script.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "already running") {
		t.Errorf("demo.sh over a running lab: %v\n%s", err, out)
	}
	if out, err := exec.CommandContext(ctx, srchainBin, "lab", "status", name).CombinedOutput(); err != nil {
		t.Errorf("the running lab was disturbed: %v\n%s", err, out)
	}
}
