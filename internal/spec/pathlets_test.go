package spec

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestPathletsShape: for every chain length and max_sids, the split keeps
// every list within max_sids, visits the NFs in the chain's order, uses
// the fewest levels of binding SIDs that hold them, and leaves a chain
// that fits unsplit.
func TestPathletsShape(t *testing.T) {
	for m := MinMaxSIDs; m <= 8; m++ {
		for n := 1; n <= 80; n++ {
			c := &Chain{Mode: ModeEncap, MaxSIDs: m, NFs: make([]string, n)}
			ps := c.split()
			if n+1 <= m {
				if ps != nil {
					t.Fatalf("n=%d m=%d: split %v, want none", n, m, ps)
				}
				continue
			}
			var leaves []int
			var walk func(k, depth int) int
			walk = func(k, depth int) int {
				if l := PathletLen(ps, k); l > m || l < 2 {
					t.Fatalf("n=%d m=%d: pathlet %d has %d segments", n, m, k, l)
				}
				deepest := depth
				for _, it := range ps[k].Items {
					if it.Sub > 0 {
						if ps[it.Sub].Parent != k {
							t.Fatalf("n=%d m=%d: pathlet %d parent %d, want %d", n, m, it.Sub, ps[it.Sub].Parent, k)
						}
						deepest = max(deepest, walk(it.Sub, depth+1))
					} else {
						leaves = append(leaves, it.NF)
					}
				}
				return deepest
			}
			depth := walk(0, 0)
			for i, l := range leaves {
				if l != i {
					t.Fatalf("n=%d m=%d: NFs in order %v", n, m, leaves)
				}
			}
			if len(leaves) != n {
				t.Fatalf("n=%d m=%d: %d NFs carried", n, m, len(leaves))
			}
			least, capacity := 0, m-1
			for capacity < n {
				least++
				capacity *= m - 1
			}
			if depth != least {
				t.Errorf("n=%d m=%d: %d levels of binding SIDs, %d would do", n, m, depth, least)
			}
			steps := PathletSteps(ps)
			if b := len(ps) - 1; countSteps(steps, "binding") != b || countSteps(steps, "end") != b {
				t.Errorf("n=%d m=%d: steps %v for %d pathlets", n, m, steps, b)
			}
		}
	}
}

func countSteps(steps []PathletStep, what string) int {
	n := 0
	for _, s := range steps {
		if (what == "binding" && s.Binding > 0) || (what == "end" && s.End > 0) {
			n++
		}
	}
	return n
}

// TestPathletsExample: examples/pathlets.yaml's 12 NFs at max_sids 4 are
// the top list [n01, B1, B2, egress], B1 = [n02, n03], B2 = [B3, B4, B5]
// with three NFs each; each binding SID is on the node of its pathlet's
// first NF, each End.DT6 on the node of the NF after it (or the egress),
// and the SIDs are allocated after every NF and egress SID.
func TestPathletsExample(t *testing.T) {
	s, err := Load("../../examples/pathlets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := &s.Chains[0]
	ps := s.Pathlets(c)
	var got []string
	for k, p := range ps {
		var items []string
		for _, it := range p.Items {
			if it.Sub > 0 {
				items = append(items, fmt.Sprintf("B%d", it.Sub))
			} else {
				items = append(items, c.NFs[it.NF])
			}
		}
		got = append(got, fmt.Sprintf("%d:%s@%s>%s", k, strings.Join(items, ","), p.Host, p.End))
	}
	want := []string{
		"0:n01,B1,B2@r1>",
		"1:n02,n03@r3>r3",
		"2:B3,B4,B5@r3>r4",
		"3:n04,n05,n06@r3>r2",
		"4:n07,n08,n09@r2>r3",
		"5:n10,n11,n12@r3>r4",
	}
	if !slices.Equal(got, want) {
		t.Errorf("pathlets\n got %q\nwant %q", got, want)
	}
	if o := c.Overhead(); o != 3*(IPv6HeaderLen+SRHFixedLen+4*SIDLen) {
		t.Errorf("overhead %d, want 3 headers of 4 SIDs", o)
	}
	plan := s.SIDs()
	if b := plan.Binding["long6"]; len(b) != 5 || b[0].String() != "fc00:3::7:0/112" {
		t.Errorf("binding SIDs of long6: %v", b)
	}
	if e := plan.PathletEnd; len(e) != 3 || e["r2"].String() != "fc00:2::7:0/112" || e["r4"].String() != "fc00:4::3:0/112" {
		t.Errorf("pathlet ends: %v", e)
	}
	if len(plan.Errors) != 0 {
		t.Errorf("allocation errors: %v", plan.Errors)
	}
}

// TestPathletsValidate: max_sids is checked with its path; a chain that
// would split is refused in insert mode, with compression or OPoT, with a
// non-forward NF inside a pathlet, and on too small an MTU; the split
// lifts the eBPF datapath's 16-segment limit.
func TestPathletsValidate(t *testing.T) {
	b, err := os.ReadFile("../../examples/pathlets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	base := string(b)
	rep := func(s, old, new string) string {
		if !strings.Contains(s, old) {
			t.Fatalf("example lacks %q; update this test", old)
		}
		return strings.Replace(s, old, new, 1)
	}
	one := func(s string) string {
		// Keep one chain: long6, and its probes.
		s = s[:strings.Index(s, "  - name: long4")] + s[strings.Index(s, "traffic:"):]
		return rep(s, "  - {name: v4, from: h1, to: \"10.0.5.2\", proto: icmp, expect: long4}\n", "")
	}
	manyNFs := func(s string) string {
		var nfs, names []string
		for i := 1; i <= 20; i++ {
			node := []string{"r2", "r3"}[i%2]
			nfs = append(nfs, fmt.Sprintf("  - {name: m%02d, kind: forward, node: %s}", i, node))
			names = append(names, fmt.Sprintf("m%02d", i))
		}
		s = rep(s, "nfs:\n  - {name: n01", "nfs:\n"+strings.Join(nfs, "\n")+"\n  - {name: n01")
		return rep(s, "nfs: [n01, n02, n03, n04, n05, n06, n07, n08, n09, n10, n11, n12]", "nfs: ["+strings.Join(names, ", ")+"]")
	}
	ebpf := func(s string) string {
		return rep(s, `{name: r3, role: router, locator: "fc00:3::/64"}`, `{name: r3, role: router, locator: "fc00:3::/64", datapath: ebpf}`)
	}
	for _, c := range []struct {
		name, yaml string
		want       []string
		msg        string
		among      bool // want is among the errors (others may come too)
	}{
		{"example", base, nil, "", false},
		{"too small", rep(base, "\n    max_sids: 4", "\n    max_sids: 2"), []string{"chains[0].max_sids"}, "must be 3..127", false},
		{"negative", rep(base, "\n    max_sids: 4", "\n    max_sids: -1"), []string{"chains[0].max_sids"}, "", false},
		{"too big", rep(base, "\n    max_sids: 4", "\n    max_sids: 128"), []string{"chains[0].max_sids"}, "must be 3..127", false},
		{"fits", rep(one(base), "\n    max_sids: 4", "\n    max_sids: 13"), nil, "", false},
		{"insert", rep(rep(one(base), "match: {dst: [\"fc00:a5::/64\"]}", "match: {dst: [\"fc00:a5::/64\"]}\n    mode: insert"), "\n    max_sids: 4", "\n    max_sids: 4"), []string{"chains[0].max_sids"}, "only encap mode", false},
		{"opot", rep(one(base), "\n    max_sids: 4", "\n    max_sids: 4\n    opot: true"), []string{"chains[0].max_sids"}, "OPoT", true},
		{"firewall nested", rep(base, "{name: n05, kind: forward, node: r2}", "{name: n05, kind: firewall, node: r2, config: {rules: [\"-p udp --dport 9 -j DROP\"]}}"), []string{"chains[0].nfs[4]", "chains[1].nfs[4]"}, "lands in pathlet", false},
		{"firewall on top", rep(base, "{name: n01, kind: forward, node: r2}", "{name: n01, kind: firewall, node: r2, config: {rules: [\"-p udp --dport 9 -j DROP\"]}}"), nil, "", false},
		{"mtu", rep(base, "  - mtu: 2000\n    endpoints:\n      - {node: r2", "  - mtu: 1600\n    endpoints:\n      - {node: r2"), []string{"chains[0]", "chains[1]"}, "has mtu 1600", false},
		{"ebpf 20 NFs unsplit", rep(ebpf(manyNFs(one(base))), "\n    max_sids: 4", "\n    max_sids: 0"), []string{"chains[0].nfs"}, "SRCHAIN_MAX_SEGS", false},
		{"ebpf 20 NFs split", rep(ebpf(manyNFs(one(base))), "\n    max_sids: 4", "\n    max_sids: 16"), nil, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Check([]byte(c.yaml), "in.yaml")
			var got []string
			for _, fe := range FieldErrors(err) {
				got = append(got, fe.Path)
			}
			if c.among && len(c.want) == 1 && slices.Contains(got, c.want[0]) {
				got = c.want
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("error paths %q, want %q:\n%v", got, c.want, err)
			}
			if c.msg != "" && !strings.Contains(err.Error(), c.msg) {
				t.Errorf("error lacks %q: %v", c.msg, err)
			}
		})
	}
}
