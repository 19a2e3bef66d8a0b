package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/srchain/srchain/internal/hostnode"
)

// TestDeployDocSpec: the site spec docs/deploy.md walks through is valid
// and gives r1 its loopback tunnel source.
func TestDeployDocSpec(t *testing.T) {
	b, err := os.ReadFile("../../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	_, after, ok := strings.Cut(doc, "`/etc/srchain/site.yaml`, the same file on every machine:\n\n```yaml\n")
	if !ok {
		t.Fatal("docs/deploy.md lost its site.yaml block")
	}
	body, _, ok := strings.Cut(after, "```")
	if !ok {
		t.Fatal("site.yaml block not closed")
	}
	path := filepath.Join(t.TempDir(), "site.yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, _, err := runCLI(t, "validate", path); err != nil {
		t.Fatalf("validate: %v\n%s", err, out)
	}
	out, _, err := runCLI(t, "plan", path, "--node", "r1")
	if err != nil || !strings.Contains(out, "tunsrc fc00:ff::1") || !strings.Contains(out, "segs fc00:4::1:0,fc00:3::1:0") {
		t.Errorf("plan r1: err %v, want tunsrc fc00:ff::1 and the chain through nf1:\n%s", err, out)
	}
}

// TestNodeArgs: node commands refuse a missing --node, a node the spec
// lacks, and a name that cannot name a record, before touching the host.
func TestNodeArgs(t *testing.T) {
	const qs = "../../examples/quickstart.yaml"
	if _, _, err := runCLI(t, "node", "apply", qs); err == nil || !strings.Contains(err.Error(), "node") {
		t.Errorf("apply without --node: err %v", err)
	}
	for _, cmd := range []string{"apply", "status"} {
		if _, _, err := runCLI(t, "node", cmd, qs, "--node", "r9", "--state-dir", t.TempDir()); err == nil || !strings.Contains(err.Error(), `no node "r9"`) {
			t.Errorf("%s of a node the spec lacks: err %v", cmd, err)
		}
	}
	if _, _, err := runCLI(t, "node", "reset", "--node", "../x", "--state-dir", t.TempDir()); !errors.Is(err, hostnode.ErrBadName) {
		t.Errorf("reset --node ../x: err %v, want ErrBadName", err)
	}
}
