package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidateTwentyThousandChains: `srchain validate` accepts the
// documented maximum, 20,000 chains of the benchmark's shape (issue 38
// item 8: it failed at ~18,170 with "document too large").
func TestValidateTwentyThousandChains(t *testing.T) {
	b, err := os.ReadFile("../../examples/quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	sb.WriteString("chains:\n")
	for i := range 20_000 - 2 { // with quickstart's two
		fmt.Fprintf(&sb, "  - name: c%d\n    ingress: r1\n    egress: r3\n    match: {dst: [\"fc00:a4::/64\"], proto: udp, dport: \"%d\"}\n    nfs: [fw]\n", i, 1000+i)
	}
	path := filepath.Join(t.TempDir(), "20k.yaml")
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), "chains:\n", sb.String(), 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := runCLI(t, "validate", path)
	if err != nil || !strings.Contains(out, "ok (5 nodes") {
		t.Fatalf("validate: out %q, err %v, stderr %.500s", out, err, stderr)
	}
}
