package spec

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// TestPools: a chain naming a pool gets the pool's first instance in its
// place (the chain as its kernel route steers it) and the pool recorded;
// pools and the chains that name them are checked with field paths.
func TestPools(t *testing.T) {
	b, err := os.ReadFile("../../examples/flow-pool.yaml")
	if err != nil {
		t.Fatal(err)
	}
	base := string(b)
	s, err := Check(b, "in.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := s.Chains[0]
	if c.Pool != "fw" || c.PoolAt != 0 || !slices.Equal(c.NFs, []string{"fw1"}) || s.Pools[0].Pick != PickLeastLoaded {
		t.Fatalf("chain %+v, pool %+v", c, s.Pools[0])
	}
	if v := s.Variant(&c, 1); !slices.Equal(v.NFs, []string{"fw2"}) || !slices.Equal(c.NFs, []string{"fw1"}) {
		t.Errorf("variant 1: %v (chain now %v)", v.NFs, c.NFs)
	}
	rep := func(old, new string) string {
		if !strings.Contains(base, old) {
			t.Fatalf("example lacks %q; update this test", old)
		}
		return strings.Replace(base, old, new, 1)
	}
	for _, tc := range []struct {
		name, yaml string
		want       []string
		msg        string
	}{
		{"one instance", rep("nfs: [fw1, fw2, fw3], pick", "nfs: [fw1], pick"), []string{"pools[0].nfs"}, "2..8"},
		{"unknown", rep("nfs: [fw1, fw2, fw3], pick", "nfs: [fw1, fw9], pick"), []string{"pools[0].nfs[1]"}, "unknown NF"},
		{"twice", rep("nfs: [fw1, fw2, fw3], pick", "nfs: [fw1, fw1], pick"), []string{"pools[0].nfs[1]"}, "twice"},
		{"pick", rep("pick: least-loaded", "pick: random"), []string{"pools[0].pick"}, "pick must be"},
		{"named like an NF", rep("{name: fw, nfs:", "{name: fw1, nfs:"), []string{"pools[0].name", "chains[0].nfs[0]", "chains[1].nfs[0]"}, "also an NF's name"},
		{"kernel ingress", rep(`locator: "fc00:1::/64", ingress: ebpf}`, `locator: "fc00:1::/64"}`), []string{"chains[0].ingress", "chains[1].ingress"}, "eBPF ingress"},
		{"mixed kinds", rep("{name: fw2, kind: forward, node: r3}", "{name: fw2, kind: firewall, node: r3, config: {rules: [\"-p udp --dport 9 -j DROP\"]}}"), []string{"pools[0].nfs[1]"}, "interchangeable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Check([]byte(tc.yaml), "in.yaml")
			var got []string
			for _, fe := range FieldErrors(err) {
				got = append(got, fe.Path)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("error paths %q, want %q:\n%v", got, tc.want, err)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error lacks %q: %v", tc.msg, err)
			}
		})
	}
}
