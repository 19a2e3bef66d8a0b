package testutil

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/cilium/ebpf"
)

var processedRe = regexp.MustCompile(`processed (\d+) insns`)

// VerifierBudgets loads every program of spec with verifier statistics
// and checks each one's processed instruction count against budget
// (docs/datapath.md, "Verifier budgets"). A program without a budget
// fails: every program gets one. Needs root.
func VerifierBudgets(t *testing.T, spec *ebpf.CollectionSpec, budget map[string]int) {
	t.Helper()
	RequireRoot(t)
	coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{
		Programs: ebpf.ProgramOptions{LogLevel: ebpf.LogLevelStats},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer coll.Close()
	for name, p := range coll.Programs {
		m := processedRe.FindStringSubmatch(p.VerifierLog)
		if m == nil {
			t.Fatalf("%s: no stats in verifier log %q", name, p.VerifierLog)
		}
		n, err := strconv.Atoi(m[1])
		if err != nil {
			t.Fatal(err)
		}
		b, ok := budget[name]
		switch {
		case !ok:
			t.Errorf("%s: verifier processed %d insns; no budget set", name, n)
		case n > b:
			t.Errorf("%s: verifier processed %d insns, over the budget of %d", name, n, b)
		default:
			t.Logf("%s: verifier processed %d insns (budget %d, %d%% used)", name, n, b, n*100/b)
		}
	}
}
