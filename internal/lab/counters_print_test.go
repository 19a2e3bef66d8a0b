package lab

import (
	"strings"
	"testing"

	"github.com/srchain/srchain/internal/kind"
)

// TestPrintKernelSIDCounters: a kernel SID's counters print under program
// seg6local with the NF the SID fronts and no interface list; a
// program's keep their interfaces.
func TestPrintKernelSIDCounters(t *testing.T) {
	var b strings.Builder
	PrintCounters(&b, []ProgramCounters{
		{Node: "r2", Program: "end", Interfaces: []string{"eth0"}, Counters: []kind.Counter{{Name: "sid/fc00:2::2/packets", Value: 1}}},
		{Node: "r2", Program: KernelSIDs, NF: "fw", Counters: []kind.Counter{{Name: "sid/fc00:2::1:0/packets", Value: 7}, {Name: "sid/fc00:2::1:0/errors", Value: 0}}},
		{Node: "r3", Program: KernelSIDs, Error: "namespace missing"},
	})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := [][]string{
		{"NODE", "PROGRAM", "NF", "COUNTER", "VALUE"},
		{"r2", "end", "(eth0)", "-", "sid/fc00:2::2/packets", "1"},
		{"r2", "seg6local", "fw", "sid/fc00:2::1:0/packets", "7"},
		{"r2", "seg6local", "fw", "sid/fc00:2::1:0/errors", "0"},
		{"r3", "seg6local", "-", "ERROR:", "namespace", "missing", "-"},
	}
	if len(lines) != len(want) {
		t.Fatalf("printed %d lines, want %d:\n%s", len(lines), len(want), b.String())
	}
	for i, l := range lines {
		if got := strings.Fields(l); strings.Join(got, " ") != strings.Join(want[i], " ") {
			t.Errorf("line %d = %q, want %q", i, got, want[i])
		}
	}
}
