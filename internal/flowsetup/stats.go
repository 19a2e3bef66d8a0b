package flowsetup

import (
	"sync"
	"time"
)

// LatencyBuckets are the upper bounds, in seconds, of the setup-time
// histogram (seed 004 reports 0.89 ms).
var LatencyBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1}

// Stats counts what a loop did, for metrics: flows set up per chain and
// instance, and the setup time of the packets sent on. Observe is safe
// to use as Options.Observe while Read runs elsewhere (a scrape).
type Stats struct {
	mu      sync.Mutex
	setups  map[[2]string]uint64
	count   uint64
	sum     float64
	buckets []uint64 // per LatencyBuckets, not cumulative
}

// Observe records one handled report.
func (s *Stats) Observe(st Setup) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.New {
		if s.setups == nil {
			s.setups = map[[2]string]uint64{}
		}
		s.setups[[2]string{st.Chain, st.NF}]++
	}
	if !st.Sent {
		return
	}
	if s.buckets == nil {
		s.buckets = make([]uint64, len(LatencyBuckets))
	}
	sec := float64(st.Latency) / float64(time.Second)
	s.count++
	s.sum += sec
	for i, b := range LatencyBuckets {
		if sec <= b {
			s.buckets[i]++
			break
		}
	}
}

// StatsSnapshot is a copy of Stats: Setups by {chain, instance NF}, and
// the setup-time histogram with cumulative buckets (Prometheus's form).
type StatsSnapshot struct {
	Setups  map[[2]string]uint64
	Count   uint64
	Sum     float64
	Buckets map[float64]uint64
}

// Read copies the counts.
func (s *Stats) Read() StatsSnapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := StatsSnapshot{Setups: map[[2]string]uint64{}, Count: s.count, Sum: s.sum, Buckets: map[float64]uint64{}}
	for k, v := range s.setups {
		out.Setups[k] = v
	}
	var cum uint64
	for i, b := range LatencyBuckets {
		if i < len(s.buckets) {
			cum += s.buckets[i]
		}
		out.Buckets[b] = cum
	}
	return out
}
