package spec

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// TestOPoTField: `opot: true` is accepted on the seed 003 testbed chain
// and refused, with its path, in insert mode, with compression, with an
// SR-unaware NF and when an NF shares a node with the ingress or egress
// or another NF (one share per node).
func TestOPoTField(t *testing.T) {
	b, err := os.ReadFile("../../examples/opot-testbed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	base := string(b)
	on := func(s string) string {
		return strings.Replace(s, "nfs: [vnf2, vnf3]", "nfs: [vnf2, vnf3]\n    opot: true", 1)
	}
	if !strings.Contains(on(base), "opot: true") {
		t.Fatal("the testbed's chain changed; update this test")
	}
	s, err := Parse([]byte(on(base)), "in.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !s.Chains[0].OPoT {
		t.Fatal("opot: true not decoded")
	}
	// Until a driver attaches the programs, opot is refused (never a
	// chain that promises a proof and runs unverified).
	if _, err := Check([]byte(on(base)), "in.yaml"); err == nil || !strings.Contains(err.Error(), "not deployable yet") {
		t.Fatalf("opot: true accepted (%v), want it refused until it is deployable", err)
	}
	for _, c := range []struct {
		name, yaml string
		want       []string
		msg        string
	}{
		{"off", base, nil, ""},
		{"insert", strings.Replace(on(base), "opot: true", "opot: true\n    mode: insert", 1), []string{"chains[0].opot", "chains[0].opot"}, "needs encap mode"},
		{"sr-unaware", strings.Replace(on(base), "{name: vnf3, kind: forward, node: r3}", "{name: vnf3, kind: forward, node: r3, sr_aware: false}", 1), []string{"chains[0].nfs[1]", "chains[0].opot"}, "SR-unaware"},
		{"same node", strings.Replace(on(base), "{name: vnf3, kind: forward, node: r3}", "{name: vnf3, kind: forward, node: r2}", 1), []string{"chains[0].nfs[1]", "chains[0].opot"}, "one node per share"},
		{"on egress", strings.Replace(on(base), "{name: vnf3, kind: forward, node: r3}", "{name: vnf3, kind: forward, node: r6}", 1), []string{"chains[0].nfs[1]", "chains[0].opot"}, "also the egress"},
		{"not bool", strings.Replace(on(base), "opot: true", "opot: yes please", 1), []string{"chains[0].opot"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Check([]byte(c.yaml), "in.yaml")
			var got []string
			for _, fe := range FieldErrors(err) {
				got = append(got, fe.Path)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("error paths %q, want %q:\n%v", got, c.want, err)
			}
			if c.msg != "" && !strings.Contains(err.Error(), c.msg) {
				t.Errorf("error lacks %q:\n%v", c.msg, err)
			}
		})
	}
}
