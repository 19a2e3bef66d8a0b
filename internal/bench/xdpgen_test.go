package bench

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/srchain/srchain/internal/testutil"
)

// The generator's per-packet flows (BPF test run, no live frames): run k
// carries 1 + k mod flows in the low 32 bits of the inner source, every
// other byte is the template's; with flows off the frame is the template.
func TestGeneratorFlows(t *testing.T) {
	testutil.RequireRoot(t)
	spec, err := loadXdpgen()
	if err != nil {
		t.Fatal(err)
	}
	if err := spec.Variables["cfg_ifindex"].Set(uint32(1)); err != nil {
		t.Fatal(err)
	}
	g := &Generator{}
	if err := spec.LoadAndAssign(&g.objs, nil); err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	c := proxyCase("x", "", 5, 0x1a5, proxyTC, 3)
	fr, err := BuildFrame(c.Frame, 0, 0, testEP)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SetTemplates([][]byte{fr}); err != nil {
		t.Fatal(err)
	}
	off, err := FlowOffset(c.Frame)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SetFlows(c.Flows, len(fr)-3); err == nil {
		t.Error("SetFlows accepted an offset past the frame")
	}
	run := func() []byte {
		t.Helper()
		out := make([]byte, len(fr)+256)
		ret, err := g.objs.Xdpgen.Run(&ebpf.RunOptions{Data: fr, DataOut: out})
		if err != nil {
			t.Fatal(err)
		}
		if ret != 4 { // XDP_REDIRECT
			t.Fatalf("verdict %d, want XDP_REDIRECT", ret)
		}
		return out[:len(fr)]
	}
	if err := g.SetFlows(c.Flows, off); err != nil {
		t.Fatal(err)
	}
	start, err := g.Sent()
	if err != nil {
		t.Fatal(err)
	}
	for k := range 7 {
		got := run()
		want := bytes.Clone(fr)
		binary.BigEndian.PutUint32(want[off:], uint32((start+uint64(k))%uint64(c.Flows))+1)
		if !bytes.Equal(got, want) {
			t.Errorf("run %d: frame differs from the template with flow %d", k, binary.BigEndian.Uint32(want[off:]))
		}
	}
	if err := g.SetFlows(0, 0); err != nil {
		t.Fatal(err)
	}
	if got := run(); !bytes.Equal(got, fr) {
		t.Error("flows off: frame is not the template")
	}
}
