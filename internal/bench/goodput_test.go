package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/srchain/srchain/internal/opot"
	"github.com/srchain/srchain/internal/spec"
)

// The goodput schemes' edits apply to today's examples, the specs are
// valid, OPoT is on exactly where the scheme says, and the MSS is seed
// 003 Table III's for the scheme's segments.
func TestGoodputSchemes(t *testing.T) {
	for _, sc := range GoodputSchemes {
		t.Run(sc.Name, func(t *testing.T) {
			path := filepath.Join("..", "..", "examples", sc.Example)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			text := string(b)
			for _, e := range sc.Edits {
				if !strings.Contains(text, e[0]) {
					t.Fatalf("no %q in %s", e[0], sc.Example)
				}
				text = strings.Replace(text, e[0], e[1], 1)
			}
			s, err := spec.Check([]byte(text), path)
			if err != nil {
				t.Fatal(err)
			}
			on := false
			for _, c := range s.Chains {
				on = on || c.OPoT
			}
			if on != sc.OPoT {
				t.Errorf("opot %v, scheme says %v", on, sc.OPoT)
			}
		})
	}
	if got := opot.TCPMSS(1500, 5, opot.TLVLen); got != 1288 {
		t.Errorf("OPoT MSS at 5 segments %d, Table III 1288", got)
	}
}
