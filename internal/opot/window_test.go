package opot

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

func TestWindowTable(t *testing.T) {
	type step struct {
		seq  uint64
		want error
	}
	for _, tc := range []struct {
		name  string
		size  int
		steps []step
	}{
		{"in order", 64, []step{{1, nil}, {2, nil}, {3, nil}}},
		{"zero is never valid", 64, []step{{0, ErrStale}, {1, nil}, {0, ErrStale}}},
		{"duplicate", 64, []step{{1, nil}, {1, ErrReplay}, {2, nil}, {1, ErrReplay}}},
		{"reorder inside", 64, []step{{5, nil}, {3, nil}, {4, nil}, {1, nil}, {2, nil}, {3, ErrReplay}}},
		{"window edge", 64, []step{{100, nil}, {37, nil}, {36, ErrStale}, {37, ErrReplay}}},
		{"first packet far ahead", 64, []step{{1000, nil}, {937, nil}, {936, ErrStale}}},
		// 956 and 957 share ring slot and bits with 60 and 61 (mod 128).
		{"jump beyond the ring clears it", 64, []step{{60, nil}, {61, nil}, {1000, nil}, {956, nil}, {957, nil}, {956, ErrReplay}}},
		{"block boundary", 128, []step{{63, nil}, {64, nil}, {127, nil}, {128, nil}, {64, ErrReplay}, {1, nil}, {0, ErrStale}}},
		{"slide keeps live bits", 128, []step{{10, nil}, {100, nil}, {10, ErrReplay}, {137, nil}, {10, ErrReplay}, {138, nil}, {10, ErrStale}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := NewWindow(tc.size)
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range tc.steps {
				err := w.Check(s.seq)
				if !errors.Is(err, s.want) || (s.want == nil && err != nil) {
					t.Fatalf("step %d: Check(%d) = %v, want %v", i, s.seq, err, s.want)
				}
				if err == nil {
					w.Update(s.seq)
				}
			}
		})
	}
	for _, size := range []int{0, 63, 65, MaxWindow + 64} {
		if _, err := NewWindow(size); err == nil {
			t.Errorf("NewWindow(%d) accepted", size)
		}
	}
}

// TestWindowModel compares the ring bitmap with the definition (a set of
// accepted numbers and the highest) on random traffic with reordering,
// duplicates and jumps.
func TestWindowModel(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, size := range []int{64, 128, 1024} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			w, _ := NewWindow(size)
			seen := map[uint64]bool{}
			var top, next uint64
			for range 200000 {
				var seq uint64
				switch x := r.IntN(100); {
				case x < 60:
					next++
					seq = next
				case x < 90 && next > 0:
					seq = next - r.Uint64N(min(next, uint64(size)*2))
				case x < 99:
					next += r.Uint64N(uint64(size) * 3)
					seq = next
				default:
					seq = 0
				}
				var want error
				switch {
				case seq == 0 || (seq <= top && top-seq >= uint64(size)):
					want = ErrStale
				case seen[seq]:
					want = ErrReplay
				}
				if err := w.Check(seq); err != want {
					t.Fatalf("Check(%d) with top %d = %v, want %v", seq, top, err, want)
				}
				if want == nil {
					w.Update(seq)
					seen[seq] = true
					top = max(top, seq)
				}
			}
		})
	}
}
