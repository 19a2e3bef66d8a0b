package ingress

import (
	"testing"

	"github.com/srchain/srchain/internal/testutil"
)

// verifierBudget is the most instructions the verifier may process per
// program (docs/datapath.md, "Verifier budgets"); about 30% headroom over
// the counts measured when set (Linux 6.18: srchain_ingress 79,201,
// srchain_ingress_xdp 50,781).
var verifierBudget = map[string]int{
	"srchain_ingress":     105_000,
	"srchain_ingress_xdp": 66_000,
}

// TestVerifierStats reports and asserts the programs' verifier cost (go
// test -v -run VerifierStats).
func TestVerifierStats(t *testing.T) {
	spec, err := loadIngressProg()
	if err != nil {
		t.Fatal(err)
	}
	testutil.VerifierBudgets(t, spec, verifierBudget)
}
