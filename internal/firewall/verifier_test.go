package firewall

import (
	"testing"

	"github.com/srchain/srchain/internal/testutil"
)

// verifierBudget is the most instructions the verifier may process per
// program (docs/datapath.md, "Verifier budgets"). Measured when set, on
// Linux 6.18: srchain_fw 168,180, srchain_fw_xdp 166,179; about 30%
// headroom.
var verifierBudget = map[string]int{
	"srchain_fw":     220_000,
	"srchain_fw_xdp": 220_000,
}

// TestVerifierStats reports how many instructions the verifier processed
// for each program and asserts the budgets (go test -v -run
// VerifierStats).
func TestVerifierStats(t *testing.T) {
	spec, err := loadFwProg()
	if err != nil {
		t.Fatal(err)
	}
	testutil.VerifierBudgets(t, spec, verifierBudget)
}
