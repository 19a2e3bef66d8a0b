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
	"github.com/srchain/srchain/internal/kind"
	"github.com/srchain/srchain/internal/lab"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
)

// TestLabSERAFirewallEBPFEnd deploys examples/sera-firewall.yaml with
// nfv and ids on the eBPF datapath: ids' NF SID has ARGS bits (a
// LOC+FUNCT prefix, the policy writes fc00:4::1d5), which the End
// program must match on LOC+FUNCT, and the probe verdict must accept the
// written SID. Issue 8: 0 of 3 probes arrived, and the verdict said FAIL
// on a correct path.
func TestLabSERAFirewallEBPFEnd(t *testing.T) {
	fwNeedRoot(t)
	lb := deployExample(t, "sera-firewall.yaml", spec.DatapathEBPF, "nfv", "ids")
	lb.probeAll(t)
	// The fast path served them: ids' SID counter (the SID with ARGS)
	// moved in the End program, and tc forwarded them (FIB lookups).
	sid, fib := lb.endCounters(t, "ids", "sid/fc00:4::")
	if sid == 0 || fib == 0 {
		t.Errorf("ids' End program: %d packets for its SID, %d tc FIB successes; want both > 0", sid, fib)
	}
}

// exampleLab is an example deployed in a lab by deployExample.
type exampleLab struct {
	s    *spec.Spec
	net  *state.Network
	opts lab.Options
	pr   *lab.Prober
}

// deployExample brings examples/file up with datapath dp on the given
// routers, removed (namespaces and pins) when the test ends.
func deployExample(t *testing.T, file, dp string, nodes ...string) *exampleLab {
	t.Helper()
	return deploySpec(t, exampleSpec(t, file, dp, nodes...))
}

// deploySpec brings s up, removed (namespaces and pins) when the test
// ends.
func deploySpec(t *testing.T, s *spec.Spec) *exampleLab {
	t.Helper()
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
	if len(s.Traffic) == 0 {
		t.Fatal("the example has no probes")
	}
	l := &exampleLab{s: s, net: net, opts: opts, pr: pr}
	t.Cleanup(func() { l.pr.Close() })
	return l
}

// exampleSpec reads examples/file with datapath dp on the given routers.
func exampleSpec(t *testing.T, file, dp string, nodes ...string) *spec.Spec {
	t.Helper()
	path := filepath.Join("..", "..", "examples", file)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read example: %v", err)
	}
	src := string(b)
	for _, n := range nodes {
		old := `{name: ` + n + `, role: router, locator: "`
		i := strings.Index(src, old)
		if i < 0 {
			t.Fatalf("%s's %s line changed; update this test", file, n)
		}
		j := i + strings.Index(src[i:], "}")
		src = src[:j] + ", datapath: " + dp + src[j:]
	}
	s, err := spec.Check([]byte(src), path) // path: files the spec names are relative to it
	if err != nil {
		t.Fatalf("spec: %v", err)
	}
	return s
}

// probeAll runs the example's probes; each must pass.
func (l *exampleLab) probeAll(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for _, p := range l.s.Traffic {
		res, err := l.pr.Run(ctx, lab.Probe{Name: p.Name, From: p.From, To: p.To, Proto: p.Proto, DPort: p.DPort, Expect: p.Expect})
		if err != nil {
			t.Fatalf("probe %s: %v", p.Name, err)
		}
		if !res.OK {
			var b strings.Builder
			l.pr.Print(&b, res, true)
			t.Errorf("probe %s: %s\n%s", p.Name, res.Why, b.String())
		}
	}
}

// endCounters sums node's End packets for SIDs starting with sidPrefix
// and the tc program's successful FIB lookups (XDP does not count those:
// a packet the XDP twin forwards moves the first and not the second).
func (l *exampleLab) endCounters(t *testing.T, node, sidPrefix string) (sid, fib uint64) {
	t.Helper()
	pcs, err := lab.Counters(t.Context(), l.net.Name, node, l.opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, pc := range pcs {
		if pc.Program != state.ProgramEnd {
			continue
		}
		sid, fib = sumCounters(pc.Counters, sidPrefix)
	}
	var out strings.Builder
	lab.PrintCounters(&out, pcs)
	t.Logf("%s counters:\n%s", node, out.String())
	return sid, fib
}

func sumCounters(cs []kind.Counter, sidPrefix string) (sid, fib uint64) {
	for _, c := range cs {
		switch {
		case strings.HasPrefix(c.Name, sidPrefix) && strings.HasSuffix(c.Name, "/packets"):
			sid += c.Value
		case c.Name == "fib/success":
			fib += c.Value
		}
	}
	return sid, fib
}
