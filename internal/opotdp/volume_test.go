package opotdp

import (
	"flag"
	"math/rand/v2"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/srchain/srchain/internal/drop"
	"github.com/srchain/srchain/internal/opot"
	"github.com/srchain/srchain/internal/testutil"
)

// volumePackets is how many packets TestNoFalseDrops sends; the issue's
// bench-style run uses -opot.packets=1000000 (docs/opot.md).
var volumePackets = flag.Int("opot.packets", 20_000, "packets of TestNoFalseDrops")

// TestNoFalseDrops sends legitimate packets through a headend, three
// transits and the verifier of a k = 5 chain (each node its own maps),
// the End between hops done on the program's own output frame (DA =
// next SID, SL - 1): every packet must be accepted, and the verifier's
// per-chain counters must show exactly that many accepts and no drop.
func TestNoFalseDrops(t *testing.T) {
	testutil.RequireRoot(t)
	const k = 5
	p, err := opot.GenerateFrom(rand.NewChaCha8([32]byte{9}), k)
	if err != nil {
		t.Fatal(err)
	}
	const id, slot = 7, 0
	nodes, travel := chainNodes(t, p, k, id, slot)
	in := frame(t, travel, 0, reservation()...)
	out := make([]byte, len(in)+256)
	hop := func(prog *ebpf.Program, data []byte) []byte {
		opts := &ebpf.RunOptions{Data: data, DataOut: out[:cap(out)]}
		ret, err := prog.Run(opts)
		if err != nil {
			t.Fatalf("test run: %v", err)
		}
		if ret != tcActNext {
			t.Fatalf("verdict %d", ret)
		}
		return append([]byte(nil), opts.DataOut...)
	}
	for i := range *volumePackets {
		pkt := hop(nodes[0].objs.SrchainOpotHeadend, in)
		for j := 1; j < k; j++ {
			if j == k-1 {
				hop(nodes[j].objs.SrchainOpotVerify, pkt)
				break
			}
			pkt = hop(nodes[j].objs.SrchainOpotTransit, pkt)
			// The End: DA = next SID, SL - 1.
			da := travel[j].As16()
			copy(pkt[ethLen+24:], da[:])
			pkt[ethLen+40+3]--
		}
		if t.Failed() {
			t.Fatalf("packet %d", i)
		}
	}
	v := nodes[k-1].objs.OpotStats
	if n := stats(t, v, id, drop.None); n != uint64(*volumePackets) {
		t.Fatalf("verifier accepted %d of %d", n, *volumePackets)
	}
	for r := drop.Reason(1); r < drop.Max; r++ {
		if n := stats(t, v, id, r); n != 0 {
			t.Errorf("verifier dropped %d as %v", n, r)
		}
	}
	t.Logf("%d legitimate packets through headend, 3 transits, verifier: 0 false drops", *volumePackets)
}
