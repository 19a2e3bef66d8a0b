package testutil

import (
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// OtherBuild loads a program named name of type typ (SchedCLS or XDP)
// whose code no srchain build has: it passes every packet on (tc
// TC_ACT_UNSPEC, XDP_PASS). Tests put it where an older srchain's
// program would be and check that an apply swaps it. Closed at cleanup.
func OtherBuild(t *testing.T, typ ebpf.ProgramType, name string) *ebpf.Program {
	t.Helper()
	ret := int64(-1) // TC_ACT_UNSPEC
	if typ == ebpf.XDP {
		ret = 2 // XDP_PASS
	}
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: name, Type: typ, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, int32(ret)), asm.Return()},
	})
	if err != nil {
		t.Fatalf("load a program of another build: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}
