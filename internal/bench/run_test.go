package bench

import (
	"math"
	"testing"
	"time"
)

// Paced low rates (latency mode) flush every frame at once; full speed
// and high paced rates keep the 64-run batch.
func TestPacing(t *testing.T) {
	tests := []struct {
		rate     float64
		interval uint64
		batch    uint32
	}{
		{0, 0, 64},
		{10e3, 100000, 1},
		{LowRate, 10000, 1},
		{500e3, 2000, 64},
		{3e6, 333, 64},
	}
	for _, tt := range tests {
		iv, b := pacing(tt.rate)
		if iv != tt.interval || b != tt.batch {
			t.Errorf("pacing(%v) = %d ns, batch %d; want %d ns, batch %d", tt.rate, iv, b, tt.interval, tt.batch)
		}
	}
}

// The per-core rate divides by the generator thread's CPU time plus
// ksoftirqd/0's (NET_RX work deferred out of the thread).
func TestDeltaPerCPU(t *testing.T) {
	at := time.Unix(100, 0)
	a := counters{at: at, cpu: 10 * time.Second, ksirq: 5 * time.Second, sent: 1000}
	b := a
	b.at = at.Add(4 * time.Second)
	b.cpu += 2 * time.Second
	b.ksirq += 500 * time.Millisecond
	b.sent += 4e6
	b.out.TxPackets = 2.5e6
	b.sink.Packets = 2.5e6
	rd := delta(a, b)
	if math.Abs(rd.PPSPerCPU-1e6) > 1e-6 || rd.CPUSeconds != 2 || rd.KsoftirqdSeconds != 0.5 || rd.CPUShare != 0.5 {
		t.Errorf("delta = %+v: want 1e6 pps per cpu (2.5e6 / (2 + 0.5) s), share 0.5", rd)
	}
	if rd.PPS != 625e3 || rd.OfferedPPS != 1e6 || math.Abs(rd.Loss-0.375) > 1e-12 {
		t.Errorf("delta = %+v", rd)
	}
}
