package drop

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// bpfCite is a repository path of srchain's C cited in prose: bpf/... ending
// in .c or .h, not inside another path (/sys/fs/bpf/..., kernel/bpf/...,
// bpf2go's ../../bpf/...) nor libbpf's <bpf/...>. A * stands for a family
// (bpf/lib/fw_*.h).
var bpfCite = regexp.MustCompile(`(?:^|[^A-Za-z0-9_./<-])(bpf/[A-Za-z0-9_/*-]+\.[ch])\b`)

// TestCitedBPFPathsExist: every bpf/ C file that docs/*.md, README.md, a
// Go file or a C file names exists, so moves and splits of the C (the
// firewall header split into bpf/lib/fw_*.h, the bench programs moved to
// bpf/bench/) cannot leave stale references behind.
func TestCitedBPFPathsExist(t *testing.T) {
	root := "../.."
	var files []string
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, docs...)
	files = append(files, filepath.Join(root, "README.md"))
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && (strings.HasSuffix(path, ".go") || strings.HasSuffix(path, ".c") || strings.HasSuffix(path, ".h")) {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range bpfCite.FindAllStringSubmatch(string(src), -1) {
			matches, err := filepath.Glob(filepath.Join(root, m[1]))
			if err != nil || len(matches) == 0 {
				rel, _ := filepath.Rel(root, f)
				t.Errorf("%s cites %s, which does not exist", rel, m[1])
			}
			checked++
		}
	}
	if checked < 10 {
		t.Fatalf("only %d citations found: the scan is broken", checked)
	}
}
