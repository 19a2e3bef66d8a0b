package spec

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// benchChainsYAML is examples/quickstart.yaml with n more chains of the
// benchmark's shape (internal/controller/bench_test.go benchChain: one
// destination, a protocol, a port, one NF), in YAML block style.
func benchChainsYAML(t testing.TB, n int) []byte {
	t.Helper()
	b, err := os.ReadFile("../../examples/quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	sb.WriteString("chains:\n")
	for i := range n {
		fmt.Fprintf(&sb, "  - name: c%d\n    ingress: r1\n    egress: r3\n    match: {dst: [\"fc00:a4::/64\"], proto: udp, dport: \"%d\"}\n    nfs: [fw]\n", i, 1000+i)
	}
	s := strings.Replace(string(b), "chains:\n", sb.String(), 1)
	if len(s) == len(b) {
		t.Fatal("quickstart.yaml changed: no chains section")
	}
	return []byte(s)
}

// TestTwentyThousandChains: the documented maximum of 20,000 chains of
// the benchmark's shape passes, as YAML and as the API's JSON (issue 38
// item 8: the fixed 200,000-node bound refused them at ~18,170), while
// a document still cannot expand past a bound derived from its size.
func TestTwentyThousandChains(t *testing.T) {
	const n = 20_000 - 2 // quickstart's two and the generated: the maximum
	y := benchChainsYAML(t, n)
	s, err := Check(y, "20k.yaml")
	if err != nil {
		t.Fatalf("YAML: %.500v", err)
	}
	if len(s.Chains) != n+2 {
		t.Fatalf("YAML: %d chains, want %d", len(s.Chains), n+2)
	}
	// As the API receives it (controller.DocFromYAML).
	var top map[string]any
	if err := yaml.Unmarshal(y, &top); err != nil {
		t.Fatal(err)
	}
	j, err := json.Marshal(top)
	if err != nil {
		t.Fatal(err)
	}
	js, err := Check(j, "20k.json")
	if err != nil {
		t.Fatalf("JSON (%d bytes): %.500v", len(j), err)
	}
	if len(js.Chains) != n+2 {
		t.Fatalf("JSON: %d chains, want %d", len(js.Chains), n+2)
	}
	if len(y) > MaxSpecSize || len(j) > MaxSpecSize {
		t.Fatalf("sizes %d, %d over MaxSpecSize", len(y), len(j))
	}
}

// TestNodeLimit: the bound grows with the document, never below
// minNodes, never past MaxSpecSize/bytesPerNode; an alias bomb of any
// size expands past it.
func TestNodeLimit(t *testing.T) {
	for _, c := range []struct{ size, want int }{
		{0, minNodes},
		{100, minNodes},
		{4 * minNodes, minNodes},
		{8 << 20, 2 << 20},
		{MaxSpecSize, MaxSpecSize / bytesPerNode},
		{4 * MaxSpecSize, MaxSpecSize / bytesPerNode},
	} {
		if got := nodeLimit(c.size); got != c.want {
			t.Errorf("nodeLimit(%d) = %d, want %d", c.size, got, c.want)
		}
	}
	// Nine levels of nine aliases in an NF's config: 9^9 nodes from a
	// few hundred bytes, padded to 3 MB with a comment (the bound then
	// ~787,000 nodes).
	b, err := os.ReadFile("../../examples/quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := "{a: &a [x, x, x, x, x, x, x, x, x]"
	prev := "a"
	for i := range 9 {
		n := string(rune('b' + i))
		cfg += ", " + n + ": &" + n + " [" + strings.Repeat("*"+prev+", ", 8) + "*" + prev + "]"
		prev = n
	}
	cfg += "}"
	src := strings.Replace(string(b), "{name: fw, kind: forward, node: r2}", "{config: "+cfg+", name: fw, kind: forward, node: r2}", 1)
	src += "# " + strings.Repeat("p", 3<<20) + "\n"
	_, err = Check([]byte(src), "bomb.yaml")
	if want := fmt.Sprintf("more than %d YAML nodes", nodeLimit(len(src))); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("padded alias bomb: %.300v", err)
	}
}
