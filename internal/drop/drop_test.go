package drop

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// TestMirrorsCHeader keeps the Go list and bpf/lib/drop.h in step: same
// count, same order, names derived from the C enumerators.
func TestMirrorsCHeader(t *testing.T) {
	src, err := os.ReadFile("../../bpf/lib/drop.h")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^\s*DROP_([A-Z0-9_]+)\s*(?:=\s*0\s*)?,`)
	var cnames []string
	for _, m := range re.FindAllStringSubmatch(string(src), -1) {
		if m[1] != "MAX" {
			cnames = append(cnames, m[1])
		}
	}
	if len(cnames) != int(Max) {
		t.Fatalf("drop.h has %d reasons before DROP_MAX, Go has %d", len(cnames), Max)
	}
	for i, c := range cnames {
		if got, want := norm(Reason(i).String()), norm(c); got != want && !aliased(c, Reason(i).String()) {
			t.Errorf("reason %d: C DROP_%s vs Go %q", i, c, Reason(i).String())
		}
	}
}

func norm(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || r == '_' {
			return -1
		}
		return unicode.ToLower(r)
	}, s)
}

// aliased covers names whose Go form is spelled out for readability.
func aliased(c, g string) bool {
	return c == "FW_PRECOND" && g == "fw-precondition"
}

func TestStringUnknown(t *testing.T) {
	if got := Reason(999).String(); got != "reason-999" {
		t.Fatalf("got %q", got)
	}
	if Max.String() == "" {
		t.Fatal("empty name")
	}
}

// notYetEmitted are reasons no BPF program emits on purpose (none at
// present: HopLimit, once the Go reference model's only, is the SR
// proxies' too since issue 34).
var notYetEmitted = map[string]bool{}

// TestEveryReasonEmitted fails when a reason in drop.h is named by no C
// source under bpf/ (dead code): retire it as DROP_RESERVED_<n> or use it.
func TestEveryReasonEmitted(t *testing.T) {
	hdr, err := os.ReadFile("../../bpf/lib/drop.h")
	if err != nil {
		t.Fatal(err)
	}
	var src strings.Builder
	err = filepath.WalkDir("../../bpf", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "include" {
			return filepath.SkipDir // vendored libbpf headers
		}
		if d.IsDir() || filepath.Base(path) == "drop.h" || !(strings.HasSuffix(path, ".c") || strings.HasSuffix(path, ".h")) {
			return nil
		}
		b, err := os.ReadFile(path)
		src.Write(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^\s*DROP_([A-Z0-9_]+)\s*(?:=\s*0\s*)?,`)
	for _, m := range re.FindAllStringSubmatch(string(hdr), -1) {
		name := m[1]
		if name == "NONE" || name == "MAX" || strings.HasPrefix(name, "RESERVED_") || notYetEmitted[name] {
			continue
		}
		if !regexp.MustCompile(`\bDROP_` + name + `\b`).MatchString(src.String()) {
			t.Errorf("DROP_%s: no program emits it; use it or rename it DROP_RESERVED_<n>", name)
		}
	}
}
