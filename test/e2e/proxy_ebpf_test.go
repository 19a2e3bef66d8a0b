package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/srchain/srchain/internal/kind"
	"github.com/srchain/srchain/internal/lab"
	"github.com/srchain/srchain/internal/state"
	"github.com/srchain/srchain/internal/testutil"
)

// TestProxyEBPFRouter: the SR proxies share a `datapath: ebpf` router with
// srchain's End program serving a forward NF there. The End hands on
// (TC_ACT_UNSPEC) what is not to its own SIDs, so in either attach order
// the proxy SIDs and the plain packets back from the legacy NFs reach the
// proxy programs: every probe of examples/proxy-testbed.yaml passes, and
// a chain through the forward NF is served by the End program (its SID
// counter moves).
func TestProxyEBPFRouter(t *testing.T) {
	requireRoot(t)
	testutil.RequireTool(t, "nft")
	s, nw := editedExample(t, "proxy-testbed.yaml", "pe", [][2]string{
		{`{name: proxy, role: router, locator: "fc00:2::/64"}`, `{name: proxy, role: router, locator: "fc00:2::/64", datapath: ebpf}`},
		{"nfs:\n", "nfs:\n  - {name: fwd, kind: forward, node: proxy}\n"},
		// Before mon6 (any UDP to the same prefix): the first match wins.
		{"  - name: mon6 ", "  - {name: fwd6, ingress: ingress, egress: egress, match: {dst: [\"fc00:a4::/64\"], proto: udp, dport: 7777}, nfs: [fwd]}\n  - name: mon6 "},
		{"traffic:\n", "traffic:\n  - {name: fwd, from: src, to: \"fc00:a4::2\", proto: udp, dport: 7777, expect: fwd6}\n"},
	})
	var fwdSID string
	for _, n := range nw.Nodes {
		for _, sd := range n.SIDs {
			if sd.NF == "fwd" {
				if sd.Datapath != state.EBPF {
					t.Fatalf("fwd's SID %s is served by %s, want the End program", sd.SID, sd.Datapath)
				}
				fwdSID = sd.SID.Addr().String()
			}
		}
	}
	opts := up(t, nw)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	px, err := lab.Open(nw.Name, "proxy", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	for _, a := range []string{"fc00:a2::1", "fc00:a3::2"} {
		if _, err := px.Run(ctx, "ping", "-6", "-c", "1", "-W", "2", a); err != nil {
			t.Fatal(err)
		}
	}
	pr, err := lab.NewProber(nw.Name, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	probeAll := func(order string) {
		for _, p := range probes(s) {
			if res, out := run(t, pr, p); !res.OK {
				t.Errorf("%s: probe %s:\n%s", order, p.Name, out)
			}
		}
	}
	probeAll("proxy programs attached first")
	// The other order: the proxy programs detached and attached again,
	// now behind the End program on every interface (tcx appends).
	var node state.Node
	for _, n := range nw.Nodes {
		if n.Name == "proxy" {
			node = n
		}
	}
	moved := 0
	for _, p := range node.Programs {
		if p.Kind == state.ProgramEnd {
			continue
		}
		d, ok := kind.DriverFor(p.Kind)
		if !ok {
			t.Fatalf("no driver for %s", p.Kind)
		}
		if err := d.Remove(ctx, px, node, p); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Apply(ctx, px, node, p); err != nil {
			t.Fatal(err)
		}
		moved++
	}
	if moved == 0 {
		t.Fatal("no proxy program on the proxy node")
	}
	probeAll("End program attached first")
	pcs, err := lab.Counters(ctx, nw.Name, "proxy", opts)
	if err != nil {
		t.Fatal(err)
	}
	var fwd uint64
	for _, pc := range pcs {
		if pc.Program != state.ProgramEnd {
			continue
		}
		for _, c := range pc.Counters {
			if c.Name == "sid/"+fwdSID+"/packets" {
				fwd = c.Value
			}
		}
	}
	if fwd < 1 {
		var out strings.Builder
		lab.PrintCounters(&out, pcs)
		t.Errorf("the End program counted %d packets for fwd's SID %s, want >= 1:\n%s", fwd, fwdSID, out.String())
	}
}
