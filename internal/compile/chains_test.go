package compile

import (
	"fmt"
	"strings"
	"testing"

	"github.com/srchain/srchain/internal/spec"
)

// fiveTupleSpec is quickstart's line with n 5-tuple chains on ingress r1,
// chain i matching UDP to port 10000+i.
func fiveTupleSpec(n int) string {
	var b strings.Builder
	b.WriteString(`name: many
nodes:
  - {name: h1, role: host}
  - {name: r1, role: router, locator: "fc00:1::/64"}
  - {name: r2, role: router, locator: "fc00:2::/64"}
  - {name: h2, role: host}
links:
  - endpoints: [{node: h1, interface: eth0, addresses: ["fc00:a1::1/64"]}, {node: r1, interface: eth0, addresses: ["fc00:a1::2/64"]}]
  - endpoints: [{node: r1, interface: eth1, addresses: ["fc00:a2::1/64"]}, {node: r2, interface: eth0, addresses: ["fc00:a2::2/64"]}]
  - endpoints: [{node: r2, interface: eth1, addresses: ["fc00:a3::1/64"]}, {node: h2, interface: eth0, addresses: ["fc00:a3::2/64"]}]
nfs:
  - {name: fw, node: r2}
chains:
`)
	for i := range n {
		fmt.Fprintf(&b, "  - {name: c%d, ingress: r1, egress: r2, match: {dst: [\"fc00:a3::/64\"], proto: udp, dport: %d}, nfs: [fw]}\n", i, 10000+i)
	}
	return b.String()
}

// TestChainTablesAvoidReserved: with 160 5-tuple chains on one ingress,
// chains 153..155 used to get tables 253, 254 and 255 (default, main,
// local): a chain's policy landed in table local and hijacked every
// packet to its prefix. Every chain must get its own table, none of the
// kernel's reserved ones, and a rule priority below the main rule's.
func TestChainTablesAvoidReserved(t *testing.T) {
	s, err := spec.Parse([]byte(fiveTupleSpec(160)), "many.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	net, err := Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	var r1 = net.Nodes[2]
	if r1.Name != "r1" {
		t.Fatalf("node order: %s", r1.Name)
	}
	tables := map[int]string{}
	for _, r := range r1.Routes {
		if r.Chain == "" {
			continue
		}
		if r.Table <= 255 {
			t.Errorf("chain %s: policy in table %d (reserved or main range)", r.Chain, r.Table)
		}
		if prev, ok := tables[r.Table]; ok {
			t.Errorf("chains %s and %s share table %d", prev, r.Chain, r.Table)
		}
		tables[r.Table] = r.Chain
	}
	if len(tables) != 160 {
		t.Errorf("%d chain tables, want 160", len(tables))
	}
	for _, r := range r1.Rules {
		if r.Table <= 255 || r.Priority >= 32766 || tables[r.Table] != r.Chain {
			t.Errorf("rule %+v", r)
		}
	}
}

// TestTooManyChains: what cannot be numbered is refused by validate (and
// by compile, which does not trust its input).
func TestTooManyChains(t *testing.T) {
	// Built in Go: as YAML this many chains would pass the decoder's
	// node limit.
	s, err := spec.Parse([]byte(fiveTupleSpec(1)), "many.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := s.Chains[0]
	s.Chains = nil
	for i := range spec.MaxChains + 1 {
		c.Name = fmt.Sprintf("c%d", i)
		c.Match.DPort = spec.PortRange{From: uint16(i), To: uint16(i)}
		s.Chains = append(s.Chains, c)
	}
	errs := spec.FieldErrors(s.Validate())
	found := false
	for _, e := range errs {
		found = found || e.Path == "chains"
	}
	if !found {
		t.Errorf("validate of %d chains: %d errors, none at chains", spec.MaxChains+1, len(errs))
	}
	if _, err := Compile(s); err == nil {
		t.Errorf("compile of %d chains succeeded", spec.MaxChains+1)
	}
}
