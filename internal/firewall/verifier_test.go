package firewall

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/cilium/ebpf"
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
	needRoot(t)
	spec, err := loadFwProg()
	if err != nil {
		t.Fatal(err)
	}
	var objs fwProgObjects
	if err := spec.LoadAndAssign(&objs, &ebpf.CollectionOptions{Programs: ebpf.ProgramOptions{LogLevel: ebpf.LogLevelStats}}); err != nil {
		t.Fatal(err)
	}
	defer objs.Close()
	re := regexp.MustCompile(`processed (\d+) insns`)
	for name, p := range map[string]*ebpf.Program{"srchain_fw": objs.SrchainFw, "srchain_fw_xdp": objs.SrchainFwXdp} {
		m := re.FindStringSubmatch(p.VerifierLog)
		if m == nil {
			t.Errorf("%s: no stats in the verifier log", name)
			continue
		}
		n, err := strconv.Atoi(m[1])
		if err != nil {
			t.Fatal(err)
		}
		if b := verifierBudget[name]; n > b {
			t.Errorf("%s: verifier processed %d instructions, over the budget of %d", name, n, b)
		} else {
			t.Logf("%s: verifier processed %d instructions (budget %d, %d%% used)", name, n, b, n*100/b)
		}
	}
}
