package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/srchain/srchain/internal/kinds/proxy"
	"github.com/srchain/srchain/internal/lab"
	"github.com/srchain/srchain/internal/state"
	"github.com/srchain/srchain/internal/testutil"
)

// TestProxyXDPRouter: a `datapath: xdp` proxy router runs its SR proxies
// as a stage of the node's XDP pipeline (docs/pipeline.md): the compiler
// puts the proxy stage at XDP, every probe of examples/proxy-testbed.yaml
// passes (the legacy NFs, a stateful firewall among them, see the plain
// packets), Check finds no drift, and the pipeline's counters show that
// the proxy stage forwarded packets at XDP, both ways.
func TestProxyXDPRouter(t *testing.T) {
	requireRoot(t)
	testutil.RequireTool(t, "nft")
	s, nw := editedExample(t, "proxy-testbed.yaml", "px", [][2]string{
		{`{name: proxy, role: router, locator: "fc00:2::/64"}`, `{name: proxy, role: router, locator: "fc00:2::/64", datapath: xdp}`},
	})
	var node state.Node
	for _, n := range nw.Nodes {
		if n.Name == "proxy" {
			node = n
		}
	}
	proxies := 0
	for _, p := range node.Programs {
		if p.Kind == proxy.Name {
			proxies++
			if !p.XDP {
				t.Errorf("proxy program %s not placed at XDP", p.NF)
			}
		}
	}
	if proxies == 0 {
		t.Fatal("no proxy program on the proxy node")
	}
	opts := up(t, nw)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	pr, err := lab.NewProber(nw.Name, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	for _, p := range probes(s) {
		if res, out := run(t, pr, p); !res.OK {
			t.Errorf("probe %s:\n%s", p.Name, out)
		}
	}
	sts, err := lab.Status(ctx, nw.Name, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range sts {
		if !st.OK() || len(st.Pending) != 0 {
			t.Errorf("node %s: problems %v, pending %v", st.Node, st.Problems, st.Pending)
		}
		if st.Node == "proxy" && !slices.ContainsFunc(st.Notes, func(n string) bool {
			return strings.HasPrefix(n, "xdp pipeline: ") && strings.Contains(n, "proxy")
		}) {
			t.Errorf("proxy node notes %q, want an xdp pipeline with the proxy stage", st.Notes)
		}
	}
	pcs, err := lab.Counters(ctx, nw.Name, "proxy", opts)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, pc := range pcs {
		if pc.Program != state.ProgramPipeline {
			continue
		}
		for _, c := range pc.Counters {
			got[c.Name] += c.Value
		}
	}
	// SR -> NF and NF -> SR of the probes' packets, at least one of each
	// probe through a proxy, redirected by the XDP stage.
	if got["stage/proxy/redirect"] < uint64(len(s.Traffic)) {
		var out strings.Builder
		lab.PrintCounters(&out, pcs)
		t.Errorf("the proxy stage redirected %d packets at XDP, want >= %d:\n%s", got["stage/proxy/redirect"], len(s.Traffic), out.String())
	}
}
