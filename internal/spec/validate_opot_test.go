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
	// The example turns opot on; base is it with opot off.
	base := strings.Replace(string(b), "\n    opot: true", "", 1)
	if base == string(b) {
		t.Fatal("examples/opot-testbed.yaml no longer has `    opot: true` after its NFs; update this test")
	}
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
	if _, err := Check([]byte(on(base)), "in.yaml"); err != nil {
		t.Fatalf("opot: true on the testbed refused: %v", err)
	}
	ebpfIngress := func(s string) string {
		return strings.Replace(s, `{name: r1, role: router, locator: "fd00:1::/64"}`, `{name: r1, role: router, locator: "fd00:1::/64", ingress: ebpf}`, 1)
	}
	for _, c := range []struct {
		name, yaml string
		want       []string
		msg        string
	}{
		{"off", base, nil, ""},
		{"insert", strings.Replace(on(base), "opot: true", "opot: true\n    mode: insert", 1), []string{"chains[0].opot"}, "needs encap mode"},
		{"same node", strings.Replace(on(base), "{name: vnf3, kind: forward, node: r3}", "{name: vnf3, kind: forward, node: r2}", 1), []string{"chains[0].nfs[1]"}, "one node per share"},
		{"on egress", strings.Replace(on(base), "{name: vnf3, kind: forward, node: r3}", "{name: vnf3, kind: forward, node: r6}", 1), []string{"chains[0].nfs[1]"}, "also the egress"},
		{"xdp", strings.Replace(on(base), `{name: r3, role: router, locator: "fd00:3::/64"}`, `{name: r3, role: router, locator: "fd00:3::/64", datapath: xdp}`, 1), nil, ""},
		{"ebpf ingress", ebpfIngress(on(base)), nil, ""},
		{"pool", strings.Replace(strings.Replace(ebpfIngress(on(base)), "nfs: [vnf2, vnf3]", "nfs: [p2, vnf3]", 1),
			"\nchains:", "\npools:\n  - {name: p2, nfs: [vnf2, vnf4], pick: hash}\nchains:", 1), []string{"chains[0].nfs"}, "no opot"},
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
