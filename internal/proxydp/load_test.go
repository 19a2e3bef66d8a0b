package proxydp

import (
	"testing"

	"github.com/srchain/srchain/internal/testutil"
)

// TestLoad: both programs pass the verifier.
func TestLoad(t *testing.T) {
	testutil.RequireRoot(t)
	p, err := Load(Options{FlowCapacity: 1024})
	if err != nil {
		t.Fatalf("%+v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

// verifierBudget bounds the verifier's work per program (docs/datapath.md,
// "Verifier budgets"): about twice what it takes today. The global
// functions (proxy_sr_run, proxy_nf_run, proxy_hdr_same) are verified
// on their own; their cost shows in the log of the program that calls them.
var verifierBudget = map[string]int{
	"srchain_proxy_sr": 130000,
	"srchain_proxy_nf": 320000,
}

// TestVerifierStats: `make bpf-stats` style budget check.
func TestVerifierStats(t *testing.T) {
	spec, err := loadProxyProg()
	if err != nil {
		t.Fatal(err)
	}
	testutil.VerifierBudgets(t, spec, verifierBudget)
}
