package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/srchain/srchain/internal/apply"
	"github.com/srchain/srchain/internal/compile"
	"github.com/srchain/srchain/internal/lab"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/spec"
)

// TestLabSERAFirewallEBPFEnd deploys examples/sera-firewall.yaml with
// nfv and ids on the eBPF datapath: ids' NF SID has ARGS bits (a
// LOC+FUNCT prefix, the policy writes fc00:4::1d5), which the End
// program must match on LOC+FUNCT, and the probe verdict must accept the
// written SID. Issue 8: 0 of 3 probes arrived, and the verdict said FAIL
// on a correct path.
func TestLabSERAFirewallEBPFEnd(t *testing.T) {
	fwNeedRoot(t)
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "sera-firewall.yaml"))
	if err != nil {
		t.Fatalf("read example: %v", err)
	}
	src := string(b)
	for _, n := range []string{"nfv", "ids"} {
		old := `{name: ` + n + `, role: router, locator: "fc00:`
		i := strings.Index(src, old)
		if i < 0 {
			t.Fatalf("sera-firewall's %s line changed; update this test", n)
		}
		j := i + strings.Index(src[i:], "}")
		src = src[:j] + ", datapath: ebpf" + src[j:]
	}
	s, err := spec.Check([]byte(src), "sera-firewall-ebpf.yaml")
	if err != nil {
		t.Fatalf("spec: %v", err)
	}
	net, err := compile.Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	net.Name = fwPrefix() + "x"
	opts := lab.Options{StateDir: t.TempDir()}
	t.Cleanup(func() {
		_ = lab.Down(context.Background(), net.Name, opts)
		for _, n := range net.Nodes {
			name := lab.NSName(net.Name, n.Name)
			_ = os.RemoveAll(filepath.Join(apply.PinRoot, name))
			if err := netns.Delete(name); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if _, err := lab.Up(ctx, net, lab.UpOptions{Options: opts}); err != nil {
		t.Fatalf("lab up: %v", err)
	}
	pr, err := lab.NewProber(net.Name, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	if len(s.Traffic) == 0 {
		t.Fatal("the example has no probes")
	}
	for _, p := range s.Traffic {
		res, err := pr.Run(ctx, lab.Probe{Name: p.Name, From: p.From, To: p.To, Proto: p.Proto, DPort: p.DPort, Expect: p.Expect})
		if err != nil {
			t.Fatalf("probe %s: %v", p.Name, err)
		}
		if !res.OK {
			var b strings.Builder
			pr.Print(&b, res, true)
			t.Errorf("probe %s: %s\n%s", p.Name, res.Why, b.String())
		}
	}
	// The fast path served them: ids' SID counter (the SID with ARGS)
	// moved in the End program.
	pcs, err := lab.Counters(ctx, net.Name, "ids", opts)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	lab.PrintCounters(&out, pcs)
	served := false
	for _, pc := range pcs {
		for _, c := range pc.Counters {
			if strings.HasPrefix(c.Name, "sid/fc00:4::") && strings.HasSuffix(c.Name, "/packets") && c.Value > 0 {
				served = true
			}
		}
	}
	if !served {
		t.Errorf("ids' End program counted no packet for its SID:\n%s", out.String())
	}
	t.Logf("ids counters:\n%s", out.String())
}
