package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/srchain/srchain/internal/compile"
	"github.com/srchain/srchain/internal/lab"
	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/trace"
)

// TestLabExamples deploys every example (examples/*.yaml) and requires
// each of its probes to pass: steered probes crossed their chain's NF SIDs
// in order and reached the destination; "none" probes never carried an SRH.
func TestLabExamples(t *testing.T) {
	requireRoot(t)
	files, _ := filepath.Glob(filepath.Join("..", "..", "examples", "*.yaml"))
	if len(files) < 3 {
		t.Fatalf("examples: %v", files)
	}
	for i, path := range files {
		file := filepath.Base(path)
		t.Run(file, func(t *testing.T) {
			s, net := example(t, file, fmt.Sprintf("x%d", i))
			opts := up(t, net)
			if lab.NeedsFlows(net) {
				// NF pools: the per-flow setup loops, as lab up runs them.
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- lab.RunFlows(ctx, net.Name, opts, nil) }()
				defer func() {
					cancel()
					if err := <-done; err != nil {
						t.Errorf("lab flows: %v", err)
					}
				}()
			}
			pr, err := lab.NewProber(net.Name, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer pr.Close()
			if len(s.Traffic) == 0 {
				t.Fatalf("%s has no traffic section", file)
			}
			for _, p := range probes(s) {
				res, out := run(t, pr, p)
				t.Log(out)
				if !res.OK {
					t.Errorf("probe %s failed:\n%s", p.Name, out)
				}
			}
		})
	}
}

// hopAt returns the hop of node.
func hopAt(hops []trace.Hop, node string) (trace.Hop, bool) {
	for _, h := range hops {
		if h.Node == node {
			return h, true
		}
	}
	return trace.Hop{}, false
}

func nodes(hops []trace.Hop) []string {
	var out []string
	for _, h := range hops {
		out = append(out, h.Node)
	}
	return out
}

// TestSERAModes checks the seed 000 testbed frame by frame: d1's chain is
// encap mode (an outer IPv6 header + SRH around the original packet, End at
// the NF, End.DX6 at egress, plain packet to d1), d2's is insert mode (the
// SRH inside the original packet, its last segment d2 itself), and traffic
// to an address no chain matches crosses the same routers with no SRH.
func TestSERAModes(t *testing.T) {
	requireRoot(t)
	_, net := example(t, "sera-testbed.yaml", "s")
	opts := up(t, net)
	pr, err := lab.NewProber(net.Name, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	nf := netip.MustParseAddr("fc00:2::f1:0")
	d1, d2 := netip.MustParseAddr("fc00:d1::2"), netip.MustParseAddr("fc00:d2::2")

	res, out := run(t, pr, lab.Probe{Name: "encap", From: "ingress", To: d1, Proto: "icmp", Expect: "d1"})
	if !res.OK || !slices.Equal(nodes(res.Hops), []string{"ingress", "nfv", "egress", "d1"}) {
		t.Fatalf("encap probe:\n%s", out)
	}
	h, _ := hopAt(res.Hops, "nfv")
	if e := h.Arrive; !e.HasSRH || !e.Encapsulated || e.OuterDst != nf || e.SL != 1 || e.InnerDst != d1 {
		t.Errorf("nfv should see an encapsulated packet to %s with SL=1 DA=%s:\n%s", d1, nf, out)
	}
	h, _ = hopAt(res.Hops, "d1")
	if e := h.Arrive; e.HasSRH || e.OuterDst != d1 {
		t.Errorf("d1 should get the decapsulated packet:\n%s", out)
	}

	res, out = run(t, pr, lab.Probe{Name: "insert", From: "ingress", To: d2, Proto: "icmp", Expect: "d2"})
	if !res.OK || !slices.Equal(nodes(res.Hops), []string{"ingress", "nfv", "egress", "d2"}) {
		t.Fatalf("insert probe:\n%s", out)
	}
	h, _ = hopAt(res.Hops, "nfv")
	if e := h.Arrive; !e.HasSRH || e.Encapsulated || e.OuterDst != nf || e.SL != 1 ||
		len(e.Segments) == 0 || e.Segments[len(e.Segments)-1] != d2 {
		t.Errorf("nfv should see an inserted SRH ending in %s with SL=1 DA=%s:\n%s", d2, nf, out)
	}
	h, _ = hopAt(res.Hops, "d2")
	if e := h.Arrive; !e.HasSRH || e.SL != 0 || e.OuterDst != d2 {
		t.Errorf("d2 should get the packet with its SRH exhausted (SL=0):\n%s", out)
	}

	res, out = run(t, pr, lab.Probe{Name: "plain", From: "ingress", To: netip.MustParseAddr("fc00:23::3"), Proto: "icmp", Expect: lab.ExpectNone})
	if !res.OK || trace.AnySRH(res.Hops) {
		t.Errorf("unmatched traffic must carry no SRH:\n%s", out)
	}
	// UDP to the chain prefix is steered too; the classifier is the prefix.
	res, out = run(t, pr, lab.Probe{Name: "udp", From: "ingress", To: d1, Proto: "udp", DPort: 7, Expect: "d1"})
	if !res.OK {
		t.Errorf("udp probe:\n%s", out)
	}
}

// TestQuickstartOrder checks the hop sequence and what each hop saw for
// both inner families.
func TestQuickstartOrder(t *testing.T) {
	requireRoot(t)
	_, net := example(t, "quickstart.yaml", "q")
	opts := up(t, net)
	pr, err := lab.NewProber(net.Name, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	for _, dst := range []string{"10.0.4.2", "fc00:a4::2"} {
		chain := "web4"
		if netip.MustParseAddr(dst).Is6() {
			chain = "web6"
		}
		res, out := run(t, pr, lab.Probe{Name: chain, From: "h1", To: netip.MustParseAddr(dst), Proto: "icmp", Expect: chain})
		if !res.OK || !slices.Equal(nodes(res.Hops), []string{"h1", "r1", "r2", "r3", "h2"}) {
			t.Fatalf("%s:\n%s", chain, out)
		}
		want := []uint8{1, 0}
		for i, n := range []string{"r2", "r3"} {
			h, _ := hopAt(res.Hops, n)
			if e := h.Arrive; !e.HasSRH || e.SL != want[i] || !e.Encapsulated {
				t.Errorf("%s at %s: want SRH with SL=%d:\n%s", chain, n, want[i], out)
			}
		}
		for _, n := range []string{"h1", "h2"} {
			h, _ := hopAt(res.Hops, n)
			if trace.AnySRH([]trace.Hop{h}) {
				t.Errorf("%s: host %s saw an SRH:\n%s", chain, n, out)
			}
		}
	}
}

// TestQuickstartInsert runs the quickstart's IPv6 chain in insert mode
// (H.Insert, RFC 8986 / RFC 8754: the SRH goes into the original packet):
// the NF sees the original source with an SRH and no inner header, and
// unmatched traffic still carries none.
func TestQuickstartInsert(t *testing.T) {
	requireRoot(t)
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "quickstart.yaml"))
	if err != nil {
		t.Fatalf("read quickstart example: %v", err)
	}
	old := `match: {dst: ["fc00:a4::/64"]}`
	if !strings.Contains(string(b), old) {
		t.Fatalf("quickstart has no %s; update this test", old)
	}
	src := strings.Replace(string(b), old, old+"\n    mode: insert", 1)
	s, err := spec.Check([]byte(src), "quickstart-insert.yaml")
	if err != nil {
		t.Fatalf("spec: %v", err)
	}
	net, err := compile.Compile(s)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	net.Name = labName("n")
	opts := up(t, net)
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
		if p.Expect != "web6" {
			continue
		}
		h, _ := hopAt(res.Hops, "r2")
		if e := h.Arrive; e == nil || !e.HasSRH || e.Encapsulated || e.OuterSrc != netip.MustParseAddr("fc00:a1::1") {
			t.Errorf("r2 should see h1's own packet with an inserted SRH:\n%s", out)
		}
	}
}
