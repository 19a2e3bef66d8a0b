package e2e

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/srchain/srchain/internal/compile"
	"github.com/srchain/srchain/internal/lab"
	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
	"github.com/srchain/srchain/internal/trace"
)

// TestLabPathlets deploys examples/pathlets.yaml (12 NFs, max_sids: 4:
// the chain is split into pathlets, two levels of binding SIDs) and
// proves from the captures that every probe crossed the 12 NFs in order,
// each on its own node, with no SRH ever holding more than 4 segments,
// three SR headers deep at the deepest. A binding SID removed by hand is
// reported as drift and the probe through it fails; re-apply repairs it.
//
// The same runs on eBPF datapaths (r1 `ingress: ebpf`, r2 `datapath:
// xdp`, r3 `datapath: ebpf`): the eBPF ingress pushes the top list, the
// eBPF End serves the NF SIDs and hands the local binding SIDs and
// End.DT6s to the kernel.
func TestLabPathlets(t *testing.T) {
	requireRoot(t)
	s, net := example(t, "pathlets.yaml", "pl")
	t.Run("kernel", func(t *testing.T) { pathletsLab(t, s, net, true) })
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "pathlets.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for _, r := range [][2]string{
		{`{name: r1, role: router, locator: "fc00:1::/64"}`, `{name: r1, role: router, locator: "fc00:1::/64", ingress: ebpf}`},
		{`{name: r2, role: router, locator: "fc00:2::/64"}`, `{name: r2, role: router, locator: "fc00:2::/64", datapath: xdp}`},
		{`{name: r3, role: router, locator: "fc00:3::/64"}`, `{name: r3, role: router, locator: "fc00:3::/64", datapath: ebpf}`},
	} {
		if !strings.Contains(text, r[0]) {
			t.Fatalf("examples/pathlets.yaml lacks %q; update this test", r[0])
		}
		text = strings.Replace(text, r[0], r[1], 1)
	}
	es, err := spec.Check([]byte(text), "pathlets-ebpf.yaml")
	if err != nil {
		t.Fatal(err)
	}
	enet, err := compile.Compile(es)
	if err != nil {
		t.Fatal(err)
	}
	enet.Name = labName("pe")
	t.Run("ebpf", func(t *testing.T) { pathletsLab(t, es, enet, false) })
}

// pathletsLab deploys net and runs TestLabPathlets' checks; drift adds
// the hand-edited binding SID part.
func pathletsLab(t *testing.T, s *spec.Spec, net *state.Network, drift bool) {
	opts := up(t, net)
	pr, err := lab.NewProber(net.Name, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()

	// The NF each SID belongs to, and the node serving it.
	nfOf := map[netip.Addr]string{}
	nodeOf := map[string]string{}
	for _, n := range net.Nodes {
		for _, sid := range n.SIDs {
			if sid.NF != "" {
				nfOf[sid.SID.Masked().Addr()] = sid.NF
				nodeOf[sid.NF] = n.Name
			}
		}
	}
	bits := s.SIDFormat.SIDBits()
	for _, p := range probes(s) {
		res, tr := run(t, pr, p)
		if !res.OK {
			t.Fatalf("probe %s: %s\n%s", p.Name, res.Why, tr)
		}
		if p.Expect == "none" {
			continue
		}
		// Every NF served exactly once, in the chain's order, by its
		// own node.
		var served []string
		for _, sv := range trace.Consumed(res.Hops) {
			pfx, _ := sv.SID.Prefix(bits)
			nf, ok := nfOf[pfx.Addr()]
			if !ok {
				continue
			}
			if sv.Unproven || sv.Node != nodeOf[nf] {
				t.Errorf("probe %s: %s credited to %s (unproven %v), want %s\n%s", p.Name, nf, sv.Node, sv.Unproven, nodeOf[nf], tr)
			}
			served = append(served, nf)
		}
		want := s.Chains[slices.IndexFunc(s.Chains, func(c spec.Chain) bool { return c.Name == p.Expect })].NFs
		if !slices.Equal(served, want) {
			t.Errorf("probe %s served %v, want %v\n%s", p.Name, served, want, tr)
		}
		// The budget holds on every frame, and the deepest frame
		// carries three SR headers (two levels of binding SIDs).
		deepest := 0
		for _, e := range res.Events {
			if !e.HasSRH {
				continue
			}
			if len(e.Segments) > 4 {
				t.Errorf("probe %s: %s %s %s carries %d segments > max_sids 4", p.Name, e.Node, e.Interface, e.Dir, len(e.Segments))
			}
			for _, l := range e.Nested {
				if len(l.Segments) > 4 {
					t.Errorf("probe %s: %s %s %s nests an SRH of %d segments > max_sids 4", p.Name, e.Node, e.Interface, e.Dir, len(l.Segments))
				}
			}
			deepest = max(deepest, 1+len(e.Nested))
		}
		if deepest != 3 {
			t.Errorf("probe %s: deepest frame has %d SR headers, want 3\n%s", p.Name, deepest, tr)
		}
	}

	if !drift {
		// On r3 the eBPF End serves the NF SIDs that arrive from the
		// wire (n06, n08, n12); those a local binding SID pushes (n02,
		// n04, n10 come right after one on r3) never pass tc ingress
		// again and are run by the SID's kernel End route, as the
		// kernel would run them anyway.
		pcs, err := lab.Counters(context.Background(), net.Name, "r3", opts)
		if err != nil {
			t.Fatal(err)
		}
		counted := map[string]bool{}
		for _, pc := range pcs {
			for _, c := range pc.Counters {
				if pc.Program != state.ProgramEnd || !strings.HasSuffix(c.Name, "/packets") || c.Value == 0 {
					continue
				}
				addr, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(c.Name, "sid/"), "/packets"))
				if err != nil {
					continue
				}
				if nf, ok := nfOf[addr]; ok {
					counted[nf] = true
				}
			}
		}
		for _, nf := range []string{"n02", "n04", "n06", "n08", "n10", "n12"} {
			want := nf == "n06" || nf == "n08" || nf == "n12"
			if counted[nf] != want {
				t.Errorf("r3's eBPF End counted %s: %v, want %v (counted %v)", nf, counted[nf], want, counted)
			}
		}
		return
	}
	// Remove pathlet 3's binding SID of chain long6 on its host by hand:
	// status shows the drift, the probe no longer arrives, re-apply
	// repairs.
	ps := s.Pathlets(&s.Chains[0])
	bind := s.SIDs().Binding["long6"][2]
	host := ps[3].Host
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns, err := lab.Open(net.Name, host, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	if out, err := ns.Run(ctx, "ip", "-6", "route", "show", bind.Masked().String()); err != nil || !strings.Contains(out, "End.B6.Encaps") {
		t.Fatalf("binding SID %s on %s: %q, %v", bind, host, out, err)
	}
	if _, err := ns.Run(ctx, "ip", "-6", "route", "del", bind.Masked().String()); err != nil {
		t.Fatal(err)
	}
	if !hostDrifts(ctx, t, net.Name, host, opts) {
		t.Errorf("status does not report the missing binding SID on %s", host)
	}
	v6 := probes(s)[0]
	if res, tr := run(t, pr, v6); res.OK || res.Delivered {
		t.Errorf("probe %s delivered without pathlet 3's binding SID\n%s", v6.Name, tr)
	}
	if _, err := lab.Reapply(ctx, net.Name, opts); err != nil {
		t.Fatal(err)
	}
	if res, tr := run(t, pr, v6); !res.OK {
		t.Errorf("probe %s after re-apply: %s\n%s", v6.Name, res.Why, tr)
	}

	// A binding SID whose segments were edited by hand (same device,
	// so only the segments differ) is drift too.
	out, err := ns.Run(ctx, "ip", "-6", "route", "show", bind.Masked().String())
	f := strings.Fields(out)
	dev := slices.Index(f, "dev")
	if err != nil || dev < 0 || dev+1 >= len(f) {
		t.Fatalf("binding SID %s on %s after re-apply: %q, %v", bind, host, out, err)
	}
	if _, err := ns.Run(ctx, "ip", "-6", "route", "replace", bind.Masked().String(), "encap", "seg6local", "action", "End.B6.Encaps",
		"srh", "segs", "fc00:4::1:0", "dev", f[dev+1]); err != nil {
		t.Fatal(err)
	}
	if !hostDrifts(ctx, t, net.Name, host, opts) {
		t.Errorf("status does not report the edited binding SID on %s", host)
	}
	changes, err := lab.Reapply(ctx, net.Name, opts)
	if err != nil || changes[host] == 0 {
		t.Errorf("re-apply: %v, %v", changes, err)
	}
	if hostDrifts(ctx, t, net.Name, host, opts) {
		t.Errorf("status still reports drift on %s after re-apply", host)
	}
}

// hostDrifts reports whether lab status finds node not as desired.
func hostDrifts(ctx context.Context, t *testing.T, name, node string, opts lab.Options) bool {
	t.Helper()
	sts, err := lab.Status(ctx, name, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range sts {
		if st.Node == node && !st.OK() {
			return true
		}
	}
	return false
}
