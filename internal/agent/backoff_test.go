package agent

import (
	"testing"
	"time"
)

// TestBackoff: retries while etcd is away wait exponentially longer,
// within [d/2, d] of the doubled wait d, never past backoffMax, and start
// again from backoffMin once a retry worked.
func TestBackoff(t *testing.T) {
	for _, r := range []float64{0, 0.5, 0.999999} {
		b := backoff{rand: func() float64 { return r }}
		d := backoffMin
		for i := range 12 {
			got := b.wait()
			if got < d/2 || got > d {
				t.Fatalf("rand %v, retry %d: waited %v, want within [%v, %v]", r, i, got, d/2, d)
			}
			d = min(2*d, backoffMax)
		}
		if d != backoffMax {
			t.Fatalf("rand %v: the wait grew to %v, want capped at %v", r, d, backoffMax)
		}
		b.reset()
		if got := b.wait(); got > backoffMin {
			t.Errorf("rand %v: after reset waited %v, want at most %v", r, got, backoffMin)
		}
	}
	// Jitter: two agents' waits differ.
	a, b := backoff{}, backoff{}
	same := 0
	for range 20 {
		if a.wait() == b.wait() {
			same++
		}
	}
	if same == 20 {
		t.Error("no jitter: 20 equal waits")
	}
	if backoffMax > time.Minute {
		t.Errorf("backoffMax %v: an agent would notice a returned etcd too late", backoffMax)
	}
}
