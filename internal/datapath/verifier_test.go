package datapath

import (
	"testing"

	"github.com/cilium/ebpf"

	"github.com/srchain/srchain/internal/testutil"
)

// verifierBudget is the most instructions the verifier may process per
// program (docs/datapath.md, "Verifier budgets"). The counts measured
// when the budgets were set, on Linux 6.18, were srchain_end 61,430 and
// srchain_end_xdp 73,231: the budgets leave about 30% headroom, so a
// change that makes verification markedly more expensive fails here long
// before the kernel's 1M limit, and the log shows by how much.
var verifierBudget = map[string]int{
	// With the OPoT transit (cfg_opot; lib/end_opot.h, global functions
	// verified on their own): 18,520 / 23,090 and 37,437 / 41,698.
	"srchain_end":     40_000, // 17,201 with the NEXT-C-SID shift (14,219 before); was 80,000
	"srchain_end_xdp": 55_000, // 32,098 (13,995 before C-SIDs); was 95,000
	// lib/srv6_encap.h through bpf/test/encap.c: 6,117 and 9,462.
	"srchain_encap_test":     8_000,
	"srchain_encap_test_xdp": 12_500,
}

// TestEndVerifierStats loads the programs with verifier statistics,
// reports the instruction counts and asserts the budgets; the End
// programs also with the OPoT transit on (cfg_opot), which must fit the
// same budgets.
func TestEndVerifierStats(t *testing.T) {
	requireRoot(t)
	for _, load := range []func() (*ebpf.CollectionSpec, error){loadEndProg, loadEndXdpProg, loadEncapTestProg} {
		spec, err := load()
		if err != nil {
			t.Fatal(err)
		}
		testutil.VerifierBudgets(t, spec, verifierBudget)
		if _, ok := spec.Variables[opotVar]; ok {
			if err := setVar(spec, opotVar); err != nil {
				t.Fatal(err)
			}
			t.Log("with cfg_opot:")
			testutil.VerifierBudgets(t, spec, verifierBudget)
		}
	}
}
