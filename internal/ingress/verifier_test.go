package ingress

import (
	"testing"

	"github.com/srchain/srchain/internal/testutil"
)

// verifierBudget is the most instructions the verifier may process per
// program (docs/datapath.md, "Verifier budgets"); about 30% headroom over
// the counts measured when set (Linux 6.18, issue 34: srchain_ingress
// 126,058, up from 79,201 with the kernel-path checks and the Packet Too
// Big / fragmentation-needed answers whose checksum loop covers a
// 1232-byte quote; srchain_ingress_xdp 54,097).
var verifierBudget = map[string]int{
	"srchain_ingress":     165_000,
	"srchain_ingress_xdp": 70_000,
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
