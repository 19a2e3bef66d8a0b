package datapath

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestPassReasonsMatchC keeps passReasons in step with enum
// end_pass_reason of bpf/lib/end.h: one name per value, in order, each
// name the C name's lower-case words (PASS_NEXT_LOCAL -> "next-local"),
// except where the C name is abbreviated.
func TestPassReasonsMatchC(t *testing.T) {
	src, err := os.ReadFile("../../bpf/lib/end.h")
	if err != nil {
		t.Fatal(err)
	}
	body := regexp.MustCompile(`(?s)enum end_pass_reason \{(.*?)PASS_MAX`).FindSubmatch(src)
	if body == nil {
		t.Fatal("enum end_pass_reason not found in bpf/lib/end.h")
	}
	names := regexp.MustCompile(`(?m)^\s*PASS_([A-Z0-9_]+)`).FindAllSubmatch(body[1], -1)
	if len(names) != len(passReasons) {
		t.Fatalf("bpf/lib/end.h has %d pass reasons, passReasons %d", len(names), len(passReasons))
	}
	abbrev := map[string]string{"IPV6_HDR": "ipv6-header", "TRAILING": "trailing-bytes"}
	seen := map[string]bool{}
	for i, m := range names {
		c := string(m[1])
		want, ok := abbrev[c]
		if !ok {
			want = strings.ReplaceAll(strings.ToLower(c), "_", "-")
		}
		if passReasons[i] != want {
			t.Errorf("pass reason %d: C PASS_%s, Go %q, want %q", i, c, passReasons[i], want)
		}
		if seen[passReasons[i]] {
			t.Errorf("pass reason %q twice", passReasons[i])
		}
		seen[passReasons[i]] = true
	}
}
