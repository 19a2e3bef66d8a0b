package fwstate

import (
	"testing"

	"github.com/srchain/srchain/internal/compile"
	_ "github.com/srchain/srchain/internal/kinds/all" // kind forward
	"github.com/srchain/srchain/internal/spec"
)

func load(t *testing.T, doc []byte) (*spec.Spec, []Entries) {
	t.Helper()
	s, err := spec.Parse(doc, "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	net, err := compile.Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	es, err := Count(s, net)
	if err != nil {
		t.Fatal(err)
	}
	return s, es
}

// TestQuickstartCounts: the quickstart by hand. Chains web4 and web6 go
// r1 -> r2 (fw) -> r3. Source routing: r1 holds the two SR policies and
// routes to the locators of r2 and r3; r2 its NF SID and two locator
// routes; r3 two decapsulation SIDs and two locator routes. Rule-based:
// r1, r2 and r3 each one entry per chain.
func TestQuickstartCounts(t *testing.T) {
	doc := []byte(`name: q
sid_format: {locator_bits: 64, function_bits: 48, args_bits: 16}
nodes:
  - {name: h1, role: host}
  - {name: r1, role: router, locator: "fc00:1::/64"}
  - {name: r2, role: router, locator: "fc00:2::/64"}
  - {name: r3, role: router, locator: "fc00:3::/64"}
  - {name: h2, role: host}
links:
  - endpoints: [{node: h1, interface: eth0, addresses: ["fc00:a1::1/64"]}, {node: r1, interface: eth0, addresses: ["fc00:a1::2/64"]}]
  - endpoints: [{node: r1, interface: eth1, addresses: ["fc00:a2::1/64"]}, {node: r2, interface: eth0, addresses: ["fc00:a2::2/64"]}]
  - endpoints: [{node: r2, interface: eth1, addresses: ["fc00:a3::1/64"]}, {node: r3, interface: eth0, addresses: ["fc00:a3::2/64"]}]
  - endpoints: [{node: r3, interface: eth1, addresses: ["fc00:a4::1/64"]}, {node: h2, interface: eth0, addresses: ["fc00:a4::2/64"]}]
nfs:
  - {name: fw, kind: forward, node: r2}
chains:
  - {name: a, ingress: r1, egress: r3, match: {dst: ["fc00:a4::/64"]}, nfs: [fw]}
  - {name: b, ingress: r1, egress: r3, match: {dst: ["fc00:a4::/64"], proto: udp, dport: 53}, nfs: [fw]}
`)
	_, es := load(t, doc)
	want := map[string]Entries{
		"h1": {Node: "h1", Role: "host"},
		"h2": {Node: "h2", Role: "host"},
		// b is a 5-tuple chain: a rule and its table's route.
		"r1": {Node: "r1", Role: "router", Ingress: 3, Locators: 2, RuleBased: 2},
		"r2": {Node: "r2", Role: "router", Locators: 2, SIDs: 1, RuleBased: 2},
		"r3": {Node: "r3", Role: "router", Locators: 2, SIDs: 2, RuleBased: 2},
	}
	for _, e := range es {
		if e != want[e.Node] {
			t.Errorf("%s: %+v, want %+v", e.Node, e, want[e.Node])
		}
	}
	if len(es) != len(want) {
		t.Errorf("%d nodes, want %d", len(es), len(want))
	}
}

// TestFatTree: the generated spec validates and compiles, has the fat
// tree's 5k^2/4 switches, and rule-based state grows with the chains
// while source routing's transit state does not.
func TestFatTree(t *testing.T) {
	for _, k := range []int{4, 6} {
		for _, n := range []int{10, 100} {
			doc, err := FatTree(k, n, 1)
			if err != nil {
				t.Fatal(err)
			}
			s, es := load(t, doc)
			if got, want := len(s.Nodes), 5*k*k/4; got != want {
				t.Errorf("k=%d: %d switches, want %d", k, got, want)
			}
			sum := Summarize(es)
			if sum.Routers != len(s.Nodes) || sum.RBTotal < 4*n {
				t.Errorf("k=%d n=%d: %+v", k, n, sum)
			}
			// A core switch is never an ingress, NF or egress: with
			// source routing it holds locator routes only.
			for _, e := range es {
				if e.Node[0] == 'c' && (e.Ingress != 0 || e.SIDs != 0 || e.Locators != len(s.Nodes)-1) {
					t.Errorf("k=%d core %s: %+v", k, e.Node, e)
				}
			}
		}
	}
	if _, err := FatTree(5, 1, 1); err == nil {
		t.Error("odd k accepted")
	}
}
