package lab

import (
	"regexp"
	"strings"
	"testing"
)

// TestPrintStatusStages: the PROGRAMS column names every stage with its
// interface: the OPoT headend stage at tcx egress of an ingress router
// shows as "eth0:egress:srchain_opot_headend" (it was an empty "eth0:"),
// ingress programs before egress ones, XDP first, and an interface of a
// program that runs nothing as "IF:none", never an empty "IF:".
func TestPrintStatusStages(t *testing.T) {
	sts := []NodeStatus{
		{Node: "r1", Namespace: "ns-r1", Interfaces: map[string]string{"eth0": "up", "eth1": "up", "eth2": "up"},
			Programs: map[string][]string{
				"eth0": {egressPrefix + "srchain_opot_headend"},
				"eth1": {"srchain_opot_verify", egressPrefix + "srchain_opot_headend"},
				"eth2": nil,
			}},
		{Node: "r6", Namespace: "ns-r6", Interfaces: map[string]string{"eth0": "up"},
			Programs: map[string][]string{"eth0": {"xdp:srchain_pipeline", "srchain_opot_verify"}}},
	}
	var b strings.Builder
	PrintStatus(&b, sts)
	out := b.String()
	for _, want := range []string{
		"eth0:egress:srchain_opot_headend,eth1:srchain_opot_verify+egress:srchain_opot_headend,eth2:none",
		"eth0:xdp:srchain_pipeline+srchain_opot_verify",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if m := regexp.MustCompile(`eth\d:(,|\s)`).FindString(out); m != "" {
		t.Errorf("an interface with an empty stage list (%q):\n%s", m, out)
	}
}
