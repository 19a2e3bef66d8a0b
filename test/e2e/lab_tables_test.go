package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/srchain/srchain/internal/compile"
	"github.com/srchain/srchain/internal/lab"
	"github.com/srchain/srchain/internal/spec"
)

// TestLab160FiveTupleChains: with 160 5-tuple chains on one ingress,
// chains 153..155 got tables 253, 254 and 255 (default, main, local): a
// chain's encap route landed in table local and hijacked every packet to
// its prefix, `lab status` said BROKEN and every `lab apply` made
// changes. Now the lab is as desired, re-applying changes nothing, and no
// SR policy is in a reserved table.
func TestLab160FiveTupleChains(t *testing.T) {
	requireRoot(t)
	name := labName("t")
	var b strings.Builder
	fmt.Fprintf(&b, `name: %s
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
`, name)
	for i := range 160 {
		fmt.Fprintf(&b, "  - {name: c%d, ingress: r1, egress: r2, match: {dst: [\"fc00:a3::/64\"], proto: udp, dport: %d}, nfs: [fw]}\n", i, 10000+i)
	}
	s, err := spec.Parse([]byte(b.String()), "t.yaml")
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
	opts := up(t, net)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sts, err := lab.Status(ctx, name, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range sts {
		if !st.OK() {
			t.Errorf("status %s: %v", st.Node, st.Problems)
		}
	}
	changes, err := lab.Reapply(ctx, name, opts)
	if err != nil {
		t.Fatal(err)
	}
	for n, c := range changes {
		if c != 0 {
			t.Errorf("re-apply changed %s %d times", n, c)
		}
	}
	r1, err := lab.Open(name, "r1", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r1.Close()
	out, err := r1.Run(ctx, "ip", "-6", "route", "show", "table", "all")
	if err != nil {
		t.Fatal(err)
	}
	policies := 0
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, "encap seg6 ") {
			continue
		}
		policies++
		// Routes in main are printed without a table; local and
		// default by name.
		var table int
		if i := strings.Index(line, " table "); i < 0 {
			t.Errorf("an SR policy is in table main: %s", line)
		} else if _, err := fmt.Sscanf(line[i:], " table %d", &table); err != nil || table < 1000 {
			t.Errorf("an SR policy is in a reserved table: %s", line)
		}
	}
	if policies != 160 {
		t.Errorf("%d SR policies on r1, want 160:\n%s", policies, out)
	}
}
