package all

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/srchain/srchain/internal/kind"
	"github.com/srchain/srchain/internal/spec"
)

// TestSchemaKinds: schema.json's NF kind enum lists exactly the kinds
// linked in here, so editors offer what validate accepts.
func TestSchemaKinds(t *testing.T) {
	var schema struct {
		Defs map[string]struct {
			Properties map[string]struct {
				Enum []string `json:"enum"`
			} `json:"properties"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(spec.Schema, &schema); err != nil {
		t.Fatal(err)
	}
	enum := slices.Clone(schema.Defs["nf"].Properties["kind"].Enum)
	slices.Sort(enum)
	if want := kind.Names(); !slices.Equal(enum, want) {
		t.Errorf("schema NF kinds %v, registered kinds %v", enum, want)
	}
}

// TestUnimplementedKinds: kinds that have no package yet are refused by
// validate, which names the kinds that exist (they used to compile as a
// plain End: a spec asking for proof of transit silently got none).
func TestUnimplementedKinds(t *testing.T) {
	for _, k := range []string{"opot"} {
		src := `name: k
nodes: [{name: r1, role: router, locator: "fc00:1::/64"}]
nfs:
  - {name: a, kind: ` + k + `, node: r1}
`
		_, err := spec.Check([]byte(src), "k.yaml")
		want := `k.yaml:4:15: nfs[0].kind: unknown NF kind "` + k + `" (kinds: ` + strings.Join(kind.Names(), ", ") + `)`
		found := false
		for _, fe := range spec.FieldErrors(err) {
			found = found || fe.Error() == want
		}
		if !found {
			t.Errorf("%s: errors %v, want %s", k, err, want)
		}
	}
}

// TestContributingCitesExisting: every repository path that
// docs/CONTRIBUTING.md cites (docs, packages, files) exists.
func TestContributingCitesExisting(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	b, err := os.ReadFile(filepath.Join(root, "docs", "CONTRIBUTING.md"))
	if err != nil {
		t.Fatal(err)
	}
	cited := regexp.MustCompile(`(?:^|[\s(`+"`"+`])(\.\./[A-Za-z0-9_./-]+|(?:docs|internal|cmd|bpf|examples|test|scripts)/[A-Za-z0-9_./<>-]*|README\.md)`).FindAllStringSubmatch(string(b), -1)
	if len(cited) < 10 {
		t.Fatalf("found only %d citations", len(cited))
	}
	for _, m := range cited {
		p := strings.TrimRight(m[1], ".")
		if strings.Contains(p, "<") || strings.HasPrefix(p, "../") {
			if strings.HasPrefix(p, "../") {
				t.Errorf("CONTRIBUTING.md cites %s, outside the repository", p)
			}
			continue
		}
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Errorf("CONTRIBUTING.md cites %s: %v", p, err)
		}
	}
}
