package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/srchain/srchain/internal/lab"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/spec"
)

// TestLabUpBadSpecs: `lab up` of every invalid example prints its problems
// with their paths, fails, and creates nothing (no record, no namespace).
func TestLabUpBadSpecs(t *testing.T) {
	requireRoot(t)
	if srchainBin == "" {
		t.Fatal("srchain binary not built (see the TestMain output)")
	}
	files, _ := filepath.Glob(filepath.Join("..", "..", "examples", "bad", "*.yaml"))
	if len(files) < 10 {
		t.Fatalf("only %d bad examples", len(files))
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, f := range files {
		out, err := exec.CommandContext(ctx, srchainBin, "lab", "up", "--state-dir", dir, f).CombinedOutput()
		if err == nil {
			t.Errorf("lab up %s succeeded:\n%s", f, out)
			continue
		}
		if !strings.Contains(string(out), "invalid spec") || !strings.Contains(string(out), filepath.Base(f)) {
			t.Errorf("lab up %s: want its problems and \"invalid spec\":\n%s", f, out)
		}
		// Other tests may run labs meanwhile: look only for this spec's.
		data, _ := os.ReadFile(f)
		if s, _ := spec.Parse(data, f); s != nil && s.Name != "" {
			if left, _ := netns.List(lab.NSName(s.Name, "")); len(left) != 0 {
				t.Errorf("lab up %s created namespaces %v", f, left)
			}
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("invalid specs left lab records: %v", ents)
	}
}
