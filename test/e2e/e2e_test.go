// Package e2e deploys srchain specs into network namespaces and proves,
// by what every node saw on the wire, that traffic takes the paths the
// specs promise. Everything here needs root and skips without it.
//
// Namespaces made here carry "srct-l" plus the test process's PID (labs
// are named srct-l<pid><tag>, their namespaces src-srct-l<pid><tag>-<node>)
// and are removed when each test ends, pass or fail.
package e2e

import (
	"context"
	"fmt"
	"github.com/srchain/srchain/internal/testutil"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/srchain/srchain/internal/compile"
	"github.com/srchain/srchain/internal/kind"
	_ "github.com/srchain/srchain/internal/kinds/all" // every NF kind, as the CLI
	"github.com/srchain/srchain/internal/lab"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
)

// srchainBin is the CLI built once by TestMain for tests that need a real
// process (crash tests); empty when the build failed or without root.
var srchainBin string

func TestMain(m *testing.M) {
	code := func() int {
		if os.Geteuid() == 0 {
			dir, err := os.MkdirTemp("", "srchain-e2e-")
			if err == nil {
				defer os.RemoveAll(dir)
				bin := filepath.Join(dir, "srchain")
				cmd := exec.Command("go", "build", "-o", bin, "github.com/srchain/srchain/cmd/srchain")
				if out, err := cmd.CombinedOutput(); err != nil {
					fmt.Fprintf(os.Stderr, "e2e: build srchain: %v\n%s", err, out)
				} else {
					srchainBin = bin
				}
			}
		}
		return m.Run()
	}()
	// Belt and braces: nothing of this process may survive it.
	if left, _ := netns.List(fmt.Sprintf("src-srct-l%d", os.Getpid())); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "e2e: removing leftover namespaces %v\n", left)
		for _, n := range left {
			_ = netns.Delete(n)
		}
		code = 1
	}
	os.Exit(code)
}

func requireRoot(t *testing.T) {
	t.Helper()
	testutil.RequireRoot(t)
}

// labName is this process's lab name for tag.
func labName(tag string) string { return fmt.Sprintf("srct-l%d%s", os.Getpid(), tag) }

// example loads and compiles examples/<file>, renamed to labName(tag).
func example(t *testing.T, file, tag string) (*spec.Spec, *state.Network) {
	t.Helper()
	path := filepath.Join("..", "..", "examples", file)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("example %s: %v", file, err)
	}
	s, err := spec.Load(path)
	if err != nil {
		t.Fatalf("load %s: %v", file, err)
	}
	net, err := compile.Compile(s)
	if err != nil {
		t.Fatalf("compile %s: %v", file, err)
	}
	net.Name = labName(tag)
	return s, net
}

// renamedSpec writes a copy of examples/<file> whose name is labName(tag),
// for tests that run the CLI.
func renamedSpec(t *testing.T, file, tag string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", file))
	if err != nil {
		t.Fatalf("example %s: %v", file, err)
	}
	re := regexp.MustCompile(`(?m)^name:.*$`)
	out := re.ReplaceAll(b, []byte("name: "+labName(tag)))
	path := filepath.Join(t.TempDir(), file)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// up deploys net as a lab with a private state dir; the lab is removed
// when the test ends.
func up(t *testing.T, net *state.Network) lab.Options {
	t.Helper()
	opts := lab.Options{StateDir: t.TempDir()}
	t.Cleanup(func() { removeLab(t, net, opts) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := lab.Up(ctx, net, lab.UpOptions{Options: opts}); err != nil {
		t.Fatalf("lab up: %v", err)
	}
	return opts
}

func removeLab(t *testing.T, net *state.Network, opts lab.Options) {
	_ = lab.Down(context.Background(), net.Name, opts)
	for _, n := range net.Nodes {
		name := lab.NSName(net.Name, n.Name)
		_ = kind.StopDaemons(name) // FRR of routing: bgp, if Down failed
		_ = os.RemoveAll("/sys/fs/bpf/srchain/netns/" + name)
		if err := netns.Delete(name); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	}
}

// probes converts a spec's traffic section.
func probes(s *spec.Spec) []lab.Probe {
	var out []lab.Probe
	for _, p := range s.Traffic {
		out = append(out, lab.Probe{Name: p.Name, From: p.From, To: p.To, Proto: p.Proto, DPort: p.DPort, Expect: p.Expect})
	}
	return out
}

// run sends p and returns the result with a printable trace.
func run(t *testing.T, pr *lab.Prober, p lab.Probe) (lab.ProbeResult, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := pr.Run(ctx, p)
	if err != nil {
		t.Fatalf("probe %s: %v", p.Name, err)
	}
	var b strings.Builder
	pr.Print(&b, res, true)
	return res, b.String()
}

// cleanupCLILab removes, when the test ends, a lab a test made with the
// srchain binary (`lab down`), and any of its namespaces left behind.
func cleanupCLILab(t *testing.T, name, stateDir string) {
	t.Cleanup(func() {
		_ = exec.Command(srchainBin, "lab", "down", "--state-dir", stateDir, name).Run()
		left, _ := netns.List(lab.NSName(name, ""))
		for _, n := range left {
			_ = netns.Delete(n)
		}
	})
}
