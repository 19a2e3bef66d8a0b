package opot

import "fmt"

// Window is an IPsec-style anti-replay sliding window (RFC 4303 section
// 3.4.3, bitmap kept as a ring of 64-bit blocks in the manner of RFC
// 6479 so that sliding never shifts bits). It accepts each sequence
// number at most once and:
//   - a number above the highest accepted one (top) is new: accepted,
//     and the window slides so that top becomes that number;
//   - a number in (top - size, top] is a reordered packet: accepted once,
//     a second copy is ErrReplay;
//   - a number at or below top - size (reordered by size or more, or a
//     replay of an old packet), and 0, is ErrStale.
//
// Check does not change the window; Update records an accepted number
// and must follow a successful Check and proof (RFC 4303: update only
// after the integrity check).
type Window struct {
	size   uint64
	top    uint64
	blocks []uint64
}

// DefaultWindow is the window size used unless configured: 1024 packets
// of reordering, beyond the 32/64 RFC 4303 suggests because a chain's
// packets are spread over several CPUs and queues at every hop.
const DefaultWindow = 1024

// MaxWindow bounds the window so the eBPF clear loop stays short.
const MaxWindow = 4096

// NewWindow returns an empty window of size sequence numbers (a multiple
// of 64, 64..MaxWindow).
func NewWindow(size int) (*Window, error) {
	if size < 64 || size > MaxWindow || size%64 != 0 {
		return nil, fmt.Errorf("new window of %d: want a multiple of 64 in 64..%d: %w", size, MaxWindow, ErrProfile)
	}
	// One block more than size/64: the numbers (top-size, top] touch at
	// most size/64 + 1 blocks, and none of them may share a ring slot.
	return &Window{size: uint64(size), blocks: make([]uint64, size/64+1)}, nil
}

// Top returns the highest accepted sequence number (0: none yet).
func (w *Window) Top() uint64 { return w.top }

// Check says whether seq would be accepted.
func (w *Window) Check(seq uint64) error {
	switch {
	case seq == 0:
		return ErrStale
	case seq > w.top:
		return nil
	case w.top-seq >= w.size:
		return ErrStale
	case w.blocks[w.slot(seq)]&(1<<(seq&63)) != 0:
		return ErrReplay
	}
	return nil
}

func (w *Window) slot(seq uint64) uint64 { return (seq >> 6) % uint64(len(w.blocks)) }

// Update records seq as accepted.
func (w *Window) Update(seq uint64) {
	if seq > w.top {
		n := uint64(len(w.blocks))
		cur, next := w.top>>6, seq>>6
		steps := min(next-cur, n)
		for i := uint64(1); i <= steps; i++ {
			w.blocks[(cur+i)%n] = 0
		}
		w.top = seq
	}
	w.blocks[w.slot(seq)] |= 1 << (seq & 63)
}
