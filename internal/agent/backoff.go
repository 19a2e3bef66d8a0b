package agent

import (
	"math/rand/v2"
	"time"
)

// Retry pacing while etcd is unreachable: the first retry after
// backoffMin, each next one twice as late, at most backoffMax; each wait
// drawn uniformly from its upper half ("equal jitter"), so that the
// agents of a cluster, all cut off by the same outage, do not come back
// in step and flood the store the moment it returns.
const (
	backoffMin = 250 * time.Millisecond
	backoffMax = 15 * time.Second
)

// backoff is the wait before the next retry of one thing that failed.
type backoff struct {
	next time.Duration
	rand func() float64 // [0, 1); rand.Float64 when nil
}

// wait returns the wait before the next retry and doubles the one after.
func (b *backoff) wait() time.Duration {
	d := max(b.next, backoffMin)
	b.next = min(2*d, backoffMax)
	r := rand.Float64
	if b.rand != nil {
		r = b.rand
	}
	return d/2 + time.Duration(r()*float64(d/2))
}

// reset starts again from backoffMin: the thing worked.
func (b *backoff) reset() { b.next = 0 }
