package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/srchain/srchain/internal/apply"
	"github.com/srchain/srchain/internal/lab"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/state"
)

// dump is what a node's kernel holds, as iproute2 prints it.
func dump(t *testing.T, ns *netns.NS) string {
	t.Helper()
	var b strings.Builder
	for _, argv := range [][]string{
		{"ip", "addr"}, {"ip", "-4", "route", "show", "table", "all"}, {"ip", "-6", "route", "show", "table", "all"},
		{"ip", "-4", "rule"}, {"ip", "-6", "rule"}, {"ip", "sr", "tunsrc", "show"},
	} {
		out, err := ns.Run(context.Background(), argv[0], argv[1:]...)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(out)
	}
	return b.String()
}

// TestLabApplyIdempotentAndUndo re-applies every node of a deployed lab
// (nothing may change), then applies a changed state that fails half-way
// and requires the node to be exactly as before.
func TestLabApplyIdempotentAndUndo(t *testing.T) {
	requireRoot(t)
	for i, file := range []string{"quickstart.yaml", "sera-testbed.yaml", "opot-testbed.yaml"} {
		t.Run(file, func(t *testing.T) { applyIdempotentAndUndo(t, file, fmt.Sprintf("i%d", i)) })
	}
}

func applyIdempotentAndUndo(t *testing.T, file, tag string) {
	_, net := example(t, file, tag)
	opts := up(t, net)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, n := range net.Nodes {
		ns, err := lab.Open(net.Name, n.Name, opts)
		if err != nil {
			t.Fatal(err)
		}
		before := dump(t, ns)
		res, err := apply.ApplyWith(ctx, ns, n, apply.Options{})
		if err != nil || res.Changes != 0 {
			t.Errorf("re-apply %s: %d changes, %v; want 0, nil", n.Name, res.Changes, err)
		}
		if after := dump(t, ns); after != before {
			t.Errorf("re-apply changed %s", n.Name)
		}

		// The same node with one more route, SID and rule, and a program
		// whose driver fails last: all of it must be undone.
		bad := n
		bad.Routes = append(append([]state.Route(nil), n.Routes...), state.Route{Dst: netip.MustParsePrefix("fc00:77::/64"), Dev: n.Interfaces[0].Name,
			Encap: &state.SREncap{Mode: state.ModeEncap, Segments: []netip.Addr{netip.MustParseAddr("fc00:2::f1:0")}}})
		bad.SIDs = append(append([]state.LocalSID(nil), n.SIDs...), state.LocalSID{SID: netip.MustParsePrefix("fc00:77::e/128"), Behavior: state.End, Datapath: state.Kernel})
		bad.Rules = append(append([]state.Rule(nil), n.Rules...), state.Rule{Priority: 900, Family: 6, Dst: netip.MustParsePrefix("fc00:78::/64"), IPProto: 17, DPort: state.PortRange{From: 53, To: 53}, Table: 100})
		bad.Sysctls = append(append([]state.Sysctl(nil), n.Sysctls...), state.Sysctl{Key: "net.ipv6.conf.all.hop_limit", Value: "7"})
		bad.Programs = append(append([]state.Program(nil), n.Programs...), state.Program{Kind: "e2e-fail"})
		drivers := map[string]apply.ProgramDriver{"e2e-fail": apply.DriverFunc(func(*netns.NS, state.Node, state.Program) (func() error, error) {
			return nil, errors.New("injected failure")
		})}
		for _, p := range n.Programs {
			drivers[p.Kind] = apply.DriverFunc(func(*netns.NS, state.Node, state.Program) (func() error, error) { return nil, nil })
		}
		hl, _ := ns.Run(ctx, "sysctl", "-n", "net.ipv6.conf.all.hop_limit")
		if _, err := apply.ApplyWith(ctx, ns, bad, apply.Options{Drivers: drivers}); err == nil || !strings.Contains(err.Error(), "injected failure") {
			t.Errorf("apply %s with failing driver: %v", n.Name, err)
		}
		if after := dump(t, ns); after != before {
			t.Errorf("failed apply left changes on %s:\nbefore:\n%s\nafter:\n%s", n.Name, before, after)
		}
		if hl2, _ := ns.Run(ctx, "sysctl", "-n", "net.ipv6.conf.all.hop_limit"); hl2 != hl {
			t.Errorf("sysctl not restored on %s: %q -> %q", n.Name, hl, hl2)
		}
		ns.Close()
	}
	sts, err := lab.Status(ctx, net.Name, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sts {
		if !s.OK() {
			t.Errorf("status %s: %v", s.Node, s.Problems)
		}
	}
}

// TestLabDownAfterCrash kills `srchain lab up` as soon as it has recorded
// the lab (namespaces half made), then requires `srchain lab down` to
// remove everything and a new `lab up` to work.
func TestLabDownAfterCrash(t *testing.T) {
	requireRoot(t)
	if srchainBin == "" {
		t.Fatal("srchain binary not built (see the TestMain output)")
	}
	file := renamedSpec(t, "opot-testbed.yaml", "k")
	name := labName("k")
	dir := t.TempDir()
	cleanupCLILab(t, name, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, srchainBin, "lab", "up", "--state-dir", dir, file)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(dir, name+".json")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(rec); err == nil {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatal("lab up never wrote its record")
		}
		time.Sleep(time.Millisecond)
	}
	// Kill it once the first namespace exists: half a lab.
	for time.Now().Before(deadline) {
		if made, _ := netns.List(lab.NSName(name, "")); len(made) > 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	made, _ := netns.List(lab.NSName(name, ""))
	t.Logf("crashed with %d namespaces made", len(made))

	out, err := exec.CommandContext(ctx, srchainBin, "lab", "up", "--state-dir", dir, file).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "already exists") {
		t.Errorf("lab up over a crashed lab: %v\n%s", err, out)
	}
	if out, err := exec.CommandContext(ctx, srchainBin, "lab", "down", "--state-dir", dir, name).CombinedOutput(); err != nil {
		t.Fatalf("lab down after crash: %v\n%s", err, out)
	}
	if left, _ := netns.List(lab.NSName(name, "")); len(left) != 0 {
		t.Fatalf("namespaces left after down: %v", left)
	}
	if out, err := exec.CommandContext(ctx, srchainBin, "lab", "up", "--state-dir", dir, file).CombinedOutput(); err != nil {
		t.Fatalf("lab up after down: %v\n%s", err, out)
	}
	if out, err := exec.CommandContext(ctx, srchainBin, "lab", "status", "--state-dir", dir, name).CombinedOutput(); err != nil {
		t.Errorf("lab status: %v\n%s", err, out)
	}
	// exec passes the command's exit status through.
	err = exec.CommandContext(ctx, srchainBin, "lab", "exec", "--state-dir", dir, name, "h1", "--", "sh", "-c", "exit 3").Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Errorf("lab exec exit status: %v, want 3", err)
	}
	if out, err := exec.CommandContext(ctx, srchainBin, "lab", "down", "--state-dir", dir, file).CombinedOutput(); err != nil {
		t.Errorf("lab down by file: %v\n%s", err, out)
	}
	if left, _ := netns.List(lab.NSName(name, "")); len(left) != 0 {
		t.Errorf("namespaces left after down: %v", left)
	}
}
