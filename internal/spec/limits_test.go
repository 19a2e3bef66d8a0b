package spec

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// limitsSpec is h1 - r1 - r2 - r3 - h2 (MTU 9000, so the MTU budget never
// limits), with the chain's NFs placed by place(i) and r2's datapath dp.
func limitsSpec(nfs int, place func(i int) string, dp, mode string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `name: lim
nodes:
  - {name: h1, role: host}
  - {name: r1, role: router, locator: "fc00:1::/64"}
  - {name: r2, role: router, locator: "fc00:2::/64", datapath: %s}
  - {name: r3, role: router, locator: "fc00:3::/64"}
  - {name: h2, role: host}
links:
  - {mtu: 9000, endpoints: [{node: h1, interface: eth0, addresses: ["fc00:a1::1/64"]}, {node: r1, interface: eth0, addresses: ["fc00:a1::2/64"]}]}
  - {mtu: 9000, endpoints: [{node: r1, interface: eth1, addresses: ["fc00:a2::1/64"]}, {node: r2, interface: eth0, addresses: ["fc00:a2::2/64"]}]}
  - {mtu: 9000, endpoints: [{node: r2, interface: eth1, addresses: ["fc00:a3::1/64"]}, {node: r3, interface: eth0, addresses: ["fc00:a3::2/64"]}]}
  - {mtu: 9000, endpoints: [{node: r3, interface: eth1, addresses: ["fc00:a4::1/64"]}, {node: h2, interface: eth0, addresses: ["fc00:a4::2/64"]}]}
nfs:
`, dp)
	var names []string
	for i := 0; i < nfs; i++ {
		fmt.Fprintf(&b, "  - {name: n%d, node: %s}\n", i, place(i))
		names = append(names, fmt.Sprintf("n%d", i))
	}
	fmt.Fprintf(&b, "chains:\n  - {name: c, ingress: r1, egress: r3, mode: %s, match: {dst: [\"fc00:a4::/64\"]}, nfs: [%s]}\n",
		mode, strings.Join(names, ", "))
	return b.String()
}

// TestSegmentLimits: the SRH may hold at most 127 segments (the kernel
// refuses 128 with EINVAL, measured), at most 16 when a node on the path
// runs srchain's eBPF datapath (SRCHAIN_MAX_SEGS), and at most 8 kernel
// SIDs may follow one another on one node (lwtunnel_input recursion).
func TestSegmentLimits(t *testing.T) {
	alt := func(i int) string { return []string{"r2", "r3"}[i%2] }
	alt13 := func(i int) string { return []string{"r1", "r3"}[i%2] }
	on := func(n string) func(int) string { return func(int) string { return n } }
	for _, c := range []struct {
		name  string
		nfs   int
		place func(int) string
		dp    string
		mode  string
		want  []string // error paths
		msg   string
	}{
		{"kernel 126 NFs encap", 126, alt, "kernel", "encap", nil, ""},
		{"kernel 127 NFs encap", 127, alt, "kernel", "encap", []string{"chains[0].nfs"}, "at most 127 in a seg6 route"},
		{"kernel 126 NFs insert", 126, alt, "kernel", "insert", nil, ""},
		{"kernel 127 NFs insert", 127, alt, "kernel", "insert", []string{"chains[0].nfs"}, "(127 NFs + 1)"},
		{"kernel 200 NFs", 200, alt, "kernel", "encap", []string{"chains[0].nfs"}, "use at most 126 NFs"},
		{"ebpf 15 NFs", 15, alt, "ebpf", "encap", nil, ""},
		{"ebpf 16 NFs", 16, alt, "ebpf", "encap", []string{"chains[0].nfs"}, `node "r2" on its path runs srchain's eBPF datapath, which handles at most 16`},
		{"ebpf transit 16 NFs", 16, alt13, "ebpf", "insert", []string{"chains[0].nfs"}, `node "r2"`},
		{"kernel 8 in a row", 8, on("r2"), "kernel", "encap", nil, ""},
		{"kernel 9 in a row", 9, on("r2"), "kernel", "encap", []string{"chains[0].nfs[8]"}, `NF "n8" is SID 9 in a row on node "r2"`},
		{"kernel 8 in a row + egress", 8, on("r3"), "kernel", "encap", []string{"chains[0].egress"}, "the egress SID is SID 9 in a row"},
		{"kernel 8 in a row insert", 8, on("r3"), "kernel", "insert", nil, ""},
		{"ebpf 12 in a row", 12, on("r2"), "ebpf", "encap", nil, ""},
		{"kernel 17 in a row", 17, on("r2"), "kernel", "encap", []string{"chains[0].nfs[8]"}, "at most 8 seg6 steps in a row"},
		// At the ingress the SR policy is the first step: 7 SIDs follow.
		{"ingress 7 in a row", 7, on("r1"), "kernel", "encap", nil, ""},
		{"ingress 8 in a row", 8, on("r1"), "kernel", "encap", []string{"chains[0].nfs[7]"}, `NF "n7" is SID 8 in a row on ingress "r1" after its SR policy (seg6 step 9 there)`},
		{"ingress 8 in a row insert", 8, on("r1"), "kernel", "insert", []string{"chains[0].nfs[7]"}, "after its SR policy"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Check([]byte(limitsSpec(c.nfs, c.place, c.dp, c.mode)), "lim.yaml")
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
