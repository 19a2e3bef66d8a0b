package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/srchain/srchain/internal/lab"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/testutil"
)

// TestLabCLIMessages: `lab status` says "no labs", `lab exec` passes CMD's
// flags through with or without `--`, and `lab down` is idempotent: a lab
// that is gone is a note, not an error, and namespaces left without a
// record are still removed.
func TestLabCLIMessages(t *testing.T) {
	requireRoot(t)
	if srchainBin == "" {
		t.Fatal("srchain binary not built (see the TestMain output)")
	}
	file := renamedSpec(t, "quickstart.yaml", "m")
	name := labName("m")
	dir := t.TempDir()
	cleanupCLILab(t, name, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cli := func(args ...string) (string, string, error) {
		cmd := exec.CommandContext(ctx, srchainBin, args...)
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		return out.String(), errOut.String(), err
	}

	if out, errOut, err := cli("lab", "status", "--state-dir", dir); err != nil || out != "" || !strings.Contains(errOut, "no labs") {
		t.Errorf("lab status, no labs: %v %q %q", err, out, errOut)
	}
	if out, errOut, err := cli("lab", "up", "--state-dir", dir, file); err != nil {
		t.Fatalf("lab up: %v\n%s%s", err, out, errOut)
	}
	if out, errOut, err := cli("lab", "status", "--state-dir", dir); err != nil || out != name+"\n" || errOut != "" {
		t.Errorf("lab status, one lab: %v %q %q", err, out, errOut)
	}
	for _, args := range [][]string{{"ip", "-br", "a"}, {"--", "ip", "-br", "a"}} {
		out, errOut, err := cli(append([]string{"lab", "exec", "--state-dir", dir, name, "h1"}, args...)...)
		if err != nil || !strings.Contains(out, "10.0.1.1/24") {
			t.Errorf("lab exec %s h1 %s: %v\n%s%s", name, strings.Join(args, " "), err, out, errOut)
		}
	}
	// lab trace -w: a pcapng file tcpdump reads, with the frames every
	// node saw (a ping from h1 through the chain while it runs).
	pcap := filepath.Join(dir, "trace.pcapng")
	done := make(chan error, 1)
	go func() {
		_, errOut, err := cli("lab", "trace", "--state-dir", dir, "--duration", "3s", "-w", pcap, name)
		if err != nil {
			err = fmt.Errorf("%w: %s", err, errOut)
		}
		done <- err
	}()
	// Pings for 2 s of the trace's 3: those sent before its rings are
	// open are not seen, the rest are (no wait for the rings).
	if out, errOut, err := cli("lab", "exec", "--state-dir", dir, name, "h1", "ping", "-c", "10", "-i", "0.2", "10.0.4.2"); err != nil {
		t.Errorf("ping through the chain: %v\n%s%s", err, out, errOut)
	}
	if err := <-done; err != nil {
		t.Fatalf("lab trace -w: %v", err)
	}
	testutil.RequireTool(t, "tcpdump")
	dump, err := exec.CommandContext(ctx, "tcpdump", "-nn", "-r", pcap).CombinedOutput()
	if err != nil {
		t.Fatalf("tcpdump -r %s: %v\n%s", pcap, err, dump)
	}
	// Each echo seen is seen by 5 nodes, in and out: 8 frames are 1 echo.
	if n := strings.Count(string(dump), "ICMP echo request"); n < 8 {
		t.Errorf("the pcapng file holds %d echo requests, want the 2 pings seen on every hop:\n%s", n, dump)
	}
	if out, errOut, err := cli("lab", "down", "--state-dir", dir, name); err != nil || !strings.Contains(out, "down") {
		t.Errorf("lab down: %v\n%s%s", err, out, errOut)
	}
	// Again: nothing left is what was asked for.
	if out, errOut, err := cli("lab", "down", "--state-dir", dir, file); err != nil || !strings.Contains(out, "no such lab") {
		t.Errorf("second lab down: %v\n%s%s", err, out, errOut)
	}
	// A namespace left without a record (crash, partial cleanup) goes too.
	ns, err := netns.Create(lab.NSName(name, "h1"))
	if err != nil {
		t.Fatal(err)
	}
	ns.Close()
	if out, errOut, err := cli("lab", "down", "--state-dir", dir, name); err != nil {
		t.Errorf("lab down of an orphan namespace: %v\n%s%s", err, out, errOut)
	}
	if left, _ := netns.List(lab.NSName(name, "")); len(left) != 0 {
		t.Errorf("orphan namespaces left: %v", left)
	}
}
