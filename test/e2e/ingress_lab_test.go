package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf/link"

	"github.com/srchain/srchain/internal/apply"
	"github.com/srchain/srchain/internal/compile"
	"github.com/srchain/srchain/internal/ingress"
	"github.com/srchain/srchain/internal/kind"
	"github.com/srchain/srchain/internal/lab"
	"github.com/srchain/srchain/internal/pipeline"
	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
)

// TestLabIngressEBPF deploys the quickstart with `ingress: ebpf` on r1,
// and examples/ingress-ebpf.yaml (5-tuple chains, IPv4 and IPv6): every
// probe is delivered through its chain's NFs, r1 holds the kernel's
// policy too (an ip rule per 5-tuple chain: the path for what the fast
// path leaves to the kernel), status is clean, re-apply changes nothing, the per-chain
// counters count the probes, and a link detached by hand is reported
// and re-attached.
func TestLabIngressEBPF(t *testing.T) {
	requireRoot(t)
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "quickstart.yaml"))
	if err != nil {
		t.Fatalf("read quickstart example: %v", err)
	}
	q := strings.Replace(string(b), `{name: r1, role: router, locator: "fc00:1::/64"}`,
		`{name: r1, role: router, locator: "fc00:1::/64", ingress: ebpf}`, 1)
	if q == string(b) {
		t.Fatal("quickstart's r1 line changed; update this test")
	}
	qs, err := spec.Check([]byte(q), "quickstart-ingress.yaml")
	if err != nil {
		t.Fatalf("spec: %v", err)
	}
	// datapath: xdp on r1, which serves no NF SID: the XDP hook goes to
	// the ingress program (internal/compile xdp).
	x := strings.Replace(q, `ingress: ebpf}`, `ingress: ebpf, datapath: xdp}`, 1)
	xs, err := spec.Check([]byte(x), "quickstart-ingress-xdp.yaml")
	if err != nil {
		t.Fatalf("spec: %v", err)
	}
	xs.Name = "quickstart-xdp"
	ex, _ := example(t, "ingress-ebpf.yaml", "i")
	for i, s := range []*spec.Spec{qs, ex, xs} {
		t.Run(s.Name, func(t *testing.T) {
			net, err := compile.Compile(s)
			if err != nil {
				t.Fatalf("compile: %v", err)
			}
			net.Name = labName([]string{"iq", "ie", "ix"}[i])
			labIngress(t, s, net)
		})
	}
}

func labIngress(t *testing.T, s *spec.Spec, net *state.Network) {
	opts := up(t, net)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var r1 state.Node
	for _, n := range net.Nodes {
		if n.Name == "r1" {
			r1 = n
		}
	}
	fiveTuple := 0
	for _, c := range s.Chains {
		if c.Ingress == "r1" && c.Match.HasFiveTuple() {
			fiveTuple++
		}
	}
	if fiveTuple > 0 && len(r1.Rules) < fiveTuple {
		t.Errorf("r1 has %d ip rules for %d 5-tuple chains with ingress: ebpf", len(r1.Rules), fiveTuple)
	}
	pr, err := lab.NewProber(net.Name, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	for _, p := range probes(s) {
		res, out := run(t, pr, p)
		if !res.OK {
			t.Errorf("probe %s:\n%s", p.Name, out)
		}
	}
	sts, err := lab.Status(ctx, net.Name, opts)
	if err != nil {
		t.Fatal(err)
	}
	xdp := false // r1 asked for datapath: xdp
	for _, n := range s.Nodes {
		xdp = xdp || (n.Name == "r1" && n.Datapath == spec.DatapathXDP)
	}
	for _, st := range sts {
		if !st.OK() {
			t.Errorf("status %s: %v", st.Node, st.Problems)
		}
		if st.Node != "r1" {
			continue
		}
		for ifn, progs := range st.Programs {
			if got := len(progs) > 0 && progs[0] == "xdp:"+pipeline.ProgName; got != xdp {
				t.Errorf("r1 %s programs %v; want the XDP pipeline first: %v", ifn, progs, xdp)
			}
		}
	}
	ns, err := lab.Open(net.Name, "r1", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()

	res, err := apply.ApplyWith(ctx, ns, r1, apply.Options{})
	if err != nil || res.Changes != 0 {
		t.Errorf("re-apply r1: %d changes, %v", res.Changes, err)
	}
	var prog state.Program
	for _, p := range r1.Programs {
		if p.Kind == ingress.Program {
			prog = p
		}
	}
	d, _ := kind.DriverFor(ingress.Program)
	// What `srchain lab counters LAB r1` prints.
	pcs, err := lab.Counters(ctx, net.Name, "r1", opts)
	if err != nil {
		t.Fatal(err)
	}
	var cs []kind.Counter
	for _, pc := range pcs {
		if pc.Program == ingress.Program {
			if pc.Error != "" {
				t.Fatalf("lab counters: %s", pc.Error)
			}
			cs = pc.Counters
		}
	}
	if len(cs) == 0 {
		t.Fatal("lab counters shows no ingress counters on r1")
	}
	steered := map[string]bool{}
	for _, p := range s.Traffic {
		if p.Expect != lab.ExpectNone {
			steered[p.Expect] = true
		}
	}
	for _, c := range cs {
		name, ok := strings.CutPrefix(c.Name, "chain/")
		if ok && strings.HasSuffix(name, "/packets") && steered[strings.TrimSuffix(name, "/packets")] && c.Value == 0 {
			t.Errorf("counter %s = 0 after its probe", c.Name)
		}
	}
	// A link detached by hand: Check reports it, Apply attaches it again.
	l, err := ns.Netlink().LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	if err := detachPinned(filepath.Join(ingress.PinDir(ns), "tcx_ingress_"+strconv.Itoa(l.Attrs().Index))); err != nil {
		t.Fatal(err)
	}
	drift, err := d.Check(ctx, ns, r1, prog)
	if err != nil || len(drift) != 1 || !strings.Contains(drift[0], "not attached on eth0") {
		t.Errorf("check after detach = %q, %v", drift, err)
	}
	if _, err := d.Apply(ctx, ns, r1, prog); err != nil {
		t.Fatal(err)
	}
	if drift, err := d.Check(ctx, ns, r1, prog); err != nil || len(drift) != 0 {
		t.Errorf("check after re-apply = %q, %v", drift, err)
	}
	for _, p := range probes(s)[:1] {
		if res, out := run(t, pr, p); !res.OK {
			t.Errorf("probe %s after re-attach:\n%s", p.Name, out)
		}
	}
}

// detachPinned severs the link pinned at path by hand (as bpftool link
// detach does), leaving the pin.
func detachPinned(path string) error {
	l, err := link.LoadPinnedLink(path, nil)
	if err != nil {
		return err
	}
	defer l.Close()
	return l.Detach()
}
