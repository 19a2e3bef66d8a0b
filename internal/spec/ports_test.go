package spec

import (
	"slices"
	"strings"
	"testing"
)

// TestPortRange65535 checks that a chain's port range containing 65535
// is refused at validate with the field path (the kernel refuses such
// ip rules, so `lab up` with the kernel ingress would fail), and that
// ranges ending at 65534 pass.
func TestPortRange65535(t *testing.T) {
	const base = `name: p
nodes:
  - {name: h1, role: host}
  - {name: r1, role: router, locator: "fc00:1::/64"}
  - {name: r2, role: router, locator: "fc00:2::/64"}
links:
  - endpoints:
      - {node: h1, interface: eth0, addresses: ["fc00:a1::1/64"]}
      - {node: r1, interface: eth0, addresses: ["fc00:a1::2/64"]}
  - endpoints:
      - {node: r1, interface: eth9, addresses: ["fc00:a9::1/64"]}
      - {node: r2, interface: eth9, addresses: ["fc00:a9::2/64"]}
nfs:
  - {name: fw, node: r2}
chains:
  - {name: c0, ingress: r1, egress: r2, match: {dst: ["fc00:a1::/64"], proto: udp, MATCH}, nfs: [fw]}
`
	for _, tc := range []struct {
		match string
		paths []string // fields refused for 65535
	}{
		{`sport: "1024-65535"`, []string{"chains[0].match.sport"}},
		{`dport: "1-65535"`, []string{"chains[0].match.dport"}},
		{`dport: 65535`, []string{"chains[0].match.dport"}},
		{`dport: "65535-65535", sport: "65535"`, []string{"chains[0].match.dport", "chains[0].match.sport"}},
		{`sport: "1024-65534"`, nil},
		{`dport: 65534`, nil},
		{`dport: "1-65534", sport: 1`, nil},
	} {
		t.Run(tc.match, func(t *testing.T) {
			_, err := Check([]byte(strings.Replace(base, "MATCH", tc.match, 1)), "p.yaml")
			var got []string
			for _, fe := range FieldErrors(err) {
				if strings.Contains(fe.Msg, "65535") {
					got = append(got, fe.Path)
					if !strings.Contains(fe.Msg, "Linux refuses") || fe.Line != 16 {
						t.Errorf("error without the reason or at line %d: %v", fe.Line, fe)
					}
				} else {
					t.Errorf("unexpected error: %v", fe)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.paths) {
				t.Errorf("65535 refused at %q, want %q (err: %v)", got, tc.paths, err)
			}
		})
	}
}
