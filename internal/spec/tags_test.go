package spec

import (
	"os"
	"strings"
	"testing"
)

// TestExplicitTagsRefused: an unquoted rule starting with '!' is a YAML
// tag, not a negation; it must be an error at its position, not the rule
// without its '!' (which means the opposite).
func TestExplicitTagsRefused(t *testing.T) {
	b, err := os.ReadFile("../../examples/sera-firewall.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const rule = `- "-p udp --dport 9 -j DROP"`
	if !strings.Contains(string(b), rule) {
		t.Fatalf("example lost the rule %s", rule)
	}
	for _, tc := range []struct{ name, from, to string }{
		{"rule", rule, `- ! -p udp --dport 9 -j DROP`},
		{"local tag", "name: sera-fw", "name: !x sera-fw"},
	} {
		src := strings.Replace(string(b), tc.from, tc.to, 1)
		_, err := Parse([]byte(src), "f.yaml")
		if err == nil || !strings.Contains(err.Error(), "YAML tag") {
			t.Errorf("%s: got %v, want a YAML tag error", tc.name, err)
		}
	}
	// Columns count characters: a tag after multi-byte ones on the same
	// line (a flow mapping, as in one-line JSON-like documents) is found.
	for _, doc := range []string{
		"name: x\nnodes: [{name: \"h\u00e4\", role: ! host}]\n",
		"name: x\nnodes: [{name: \"h\", role: ! host}]\n",
	} {
		if _, err := Parse([]byte(doc), "f.yaml"); err == nil || !strings.Contains(err.Error(), "YAML tag") {
			t.Errorf("%q: got %v, want a YAML tag error", doc, err)
		}
	}
	// Core-schema tags stay allowed.
	src := strings.Replace(string(b), "name: sera-fw", "name: !!str sera-fw", 1)
	if _, err := Parse([]byte(src), "f.yaml"); err != nil {
		t.Errorf("!!str: %v", err)
	}
}
