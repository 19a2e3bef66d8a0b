package datapath

import (
	"regexp"
	"testing"

	"github.com/cilium/ebpf"
)

// TestEndVerifierStats loads the program with verifier statistics and
// reports the instruction count, so a change that blows up verification
// cost shows in the test log (and fails well before the 1M limit).
func TestEndVerifierStats(t *testing.T) {
	requireRoot(t)
	for _, load := range []func() (*ebpf.CollectionSpec, error){loadEndProg, loadEndXdpProg} {
		spec, err := load()
		if err != nil {
			t.Fatal(err)
		}
		verifierStats(t, spec)
	}
}

func verifierStats(t *testing.T, spec *ebpf.CollectionSpec) {
	coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{
		Programs: ebpf.ProgramOptions{LogLevel: ebpf.LogLevelStats},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer coll.Close()
	for name, p := range coll.Programs {
		m := regexp.MustCompile(`processed (\d+) insns`).FindStringSubmatch(p.VerifierLog)
		if m == nil {
			t.Fatalf("%s: no stats in verifier log %q", name, p.VerifierLog)
		}
		t.Logf("%s: verifier processed %s insns", name, m[1])
	}
}
