package datapath

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/cilium/ebpf"
)

// onesSum is the one's-complement sum of b's 16-bit words as the CPU
// loads them (little-endian on bpfel), folded to 16 bits: the form of
// skb->csum that bpf_csum_update adds to.
func onesSum(b []byte) uint16 {
	var s uint64
	for i := 0; i+1 < len(b); i += 2 {
		s += uint64(binary.LittleEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		s += uint64(b[len(b)-1])
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// onesEqual compares folded sums, where 0 and 0xffff are the same.
func onesEqual(a, b uint16) bool { return a == b || a|b == 0xffff && a^b == 0xffff }

// TestCsumDiff16: csum_diff16 (lib/csum.h), what the End adds to
// skb->csum after rewriting an OPoT TLV's RND and CML in place, turns the
// sum of a buffer with the old 16 bytes into the sum with the new ones,
// the block at even and odd offsets, on random bytes.
func TestCsumDiff16(t *testing.T) {
	requireRoot(t)
	var objs csumTestProgObjects
	if err := loadCsumTestProgObjects(&objs, nil); err != nil {
		t.Fatal(err)
	}
	defer objs.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 2000 {
		buf := make([]byte, 96)
		for k := range buf {
			buf[k] = byte(rng.Uint32())
		}
		at := rng.IntN(len(buf) - 16)
		old := bytes.Clone(buf[at : at+16])
		nw := make([]byte, 16)
		for k := range nw {
			nw[k] = byte(rng.Uint32())
		}
		in := append(append(append([]byte{}, old...), nw...), byte(at&1))
		out := make([]byte, len(in)+64)
		ret, err := objs.SrchainCsumTest.Run(&ebpf.RunOptions{Data: in, DataOut: out})
		if err != nil || ret != 2 { // XDP_PASS
			t.Fatalf("test run: %d, %v", ret, err)
		}
		d := binary.LittleEndian.Uint16(out)
		before := onesSum(buf)
		copy(buf[at:], nw)
		want := onesSum(buf)
		s := uint32(before) + uint32(d)
		got := uint16(s&0xffff + s>>16)
		if !onesEqual(got, want) {
			t.Fatalf("case %d, block at %d: sum %#04x + diff %#04x = %#04x, want %#04x", i, at, before, d, got, want)
		}
	}
}
