package compile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/srchain/srchain/internal/spec"
)

// FuzzCompile: every spec that passes validation compiles (unless it uses
// a feature marked ErrUnsupported), and nothing panics.
func FuzzCompile(f *testing.F) {
	files, _ := filepath.Glob("../../examples/*.yaml")
	extra, _ := filepath.Glob("testdata/*.yaml")
	for _, p := range append(files, extra...) {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := spec.Check(data, "fuzz.yaml")
		if err != nil {
			return
		}
		if _, err := Compile(s); err != nil && !errors.Is(err, ErrUnsupported) {
			t.Fatalf("valid spec does not compile: %v\n%s", err, data)
		}
	})
}
