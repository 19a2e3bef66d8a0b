package firewall

import (
	"regexp"
	"testing"

	"github.com/cilium/ebpf"
)

// TestVerifierStats logs how many instructions the verifier processed
// for each program (make bpf-stats style; go test -v -run VerifierStats).
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
		t.Logf("%s: verifier processed %s instructions", name, m[1])
	}
}
