package datapath

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/cilium/ebpf"
)

// verifierBudget is the most instructions the verifier may process per
// program (docs/datapath.md, "Verifier budgets"). The counts measured
// when the budgets were set, on Linux 6.18, were srchain_end 61,430 and
// srchain_end_xdp 73,231: the budgets leave about 30% headroom, so a
// change that makes verification markedly more expensive fails here long
// before the kernel's 1M limit, and the log shows by how much.
var verifierBudget = map[string]int{
	"srchain_end":     80_000,
	"srchain_end_xdp": 95_000,
	// lib/srv6_encap.h through bpf/test/encap.c: 6,117 and 9,462.
	"srchain_encap_test":     8_000,
	"srchain_encap_test_xdp": 12_500,
}

// TestEndVerifierStats loads the programs with verifier statistics,
// reports the instruction counts and asserts the budgets.
func TestEndVerifierStats(t *testing.T) {
	requireRoot(t)
	for _, load := range []func() (*ebpf.CollectionSpec, error){loadEndProg, loadEndXdpProg, loadEncapTestProg} {
		spec, err := load()
		if err != nil {
			t.Fatal(err)
		}
		verifierStats(t, spec, verifierBudget)
	}
}

var processedRe = regexp.MustCompile(`processed (\d+) insns`)

// verifierStats loads spec and checks each program's processed
// instruction count against budget (a program without a budget fails:
// every program gets one).
func verifierStats(t *testing.T, spec *ebpf.CollectionSpec, budget map[string]int) {
	t.Helper()
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
