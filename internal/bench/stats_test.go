package bench

import (
	"errors"
	"math"
	"testing"
)

func TestSummarize(t *testing.T) {
	tests := []struct {
		name string
		in   []float64
		want Summary
	}{
		{"one", []float64{5}, Summary{N: 1, Median: 5, Min: 5, Max: 5, Mean: 5}},
		{"odd unsorted", []float64{3, 1, 2}, Summary{N: 3, Median: 2, Min: 1, Max: 3, Mean: 2}},
		{"even takes middle mean", []float64{4, 1, 3, 2}, Summary{N: 4, Median: 2.5, Min: 1, Max: 4, Mean: 2.5}},
		{"outlier does not move median", []float64{10, 10, 1000, 9, 11}, Summary{N: 5, Median: 10, Min: 9, Max: 1000, Mean: 208}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Summarize(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("Summarize(%v) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
	if _, err := Summarize(nil); !errors.Is(err, ErrNoSamples) {
		t.Errorf("Summarize(nil) err = %v, want ErrNoSamples", err)
	}
}

func TestSummarizeKeepsInput(t *testing.T) {
	in := []float64{3, 1, 2}
	if _, err := Summarize(in); err != nil {
		t.Fatal(err)
	}
	if in[0] != 3 || in[1] != 1 {
		t.Errorf("input reordered: %v", in)
	}
}

func TestRatio(t *testing.T) {
	if got := Ratio(0.5, 2); got != 0.25 {
		t.Errorf("Ratio(0.5, 2) = %v", got)
	}
	for _, base := range []float64{0, -1, math.NaN()} {
		if got := Ratio(1, base); !math.IsNaN(got) {
			t.Errorf("Ratio(1, %v) = %v, want NaN", base, got)
		}
	}
}

func TestPercentile(t *testing.T) {
	xs := make([]float64, 100)
	for i := range xs {
		xs[i] = float64(100 - i) // 100..1, unsorted
	}
	for _, tc := range []struct{ p, want float64 }{{50, 50}, {99, 99}, {100, 100}, {0, 1}, {1, 1}} {
		got, err := Percentile(xs, tc.p)
		if err != nil || got != tc.want {
			t.Errorf("Percentile(p=%v) = %v, %v; want %v", tc.p, got, err, tc.want)
		}
	}
	if _, err := Percentile(nil, 50); !errors.Is(err, ErrNoSamples) {
		t.Errorf("Percentile(nil) err = %v", err)
	}
}

func TestFinishRatiosPerSize(t *testing.T) {
	res := &Result{Baseline: "base", Points: []Point{
		{Case: "base", Size: 0, Rounds: []Round{{Value: 100}, {Value: 120}, {Value: 110}}},
		{Case: "x", Size: 0, Rounds: []Round{{Value: 55, DUTTx: 10, Sink: 10}, {Value: 50, DUTTx: 10, Sink: 9}, {Value: 60, DUTTx: 10, Sink: 10}}},
		{Case: "base", Size: 500, Rounds: []Round{{Value: 50}}},
		{Case: "x", Size: 500, Rounds: []Round{{Value: 25}}},
		{Case: "failed", Size: 500, Err: "boom"},
	}}
	Finish(res)
	p := res.Points[1]
	if p.Summary.Median != 55 || p.Ratio != 0.5 || p.RatioMin != 50.0/110 || p.RatioMax != 60.0/110 {
		t.Errorf("size 0: %+v ratio %v (%v-%v)", p.Summary, p.Ratio, p.RatioMin, p.RatioMax)
	}
	if p.SinkOverDUT != 1 {
		t.Errorf("sink/dut = %v, want median 1", p.SinkOverDUT)
	}
	if got := res.Points[3].Ratio; got != 0.5 {
		t.Errorf("size 500 ratio = %v, want 0.5 (own-size baseline)", got)
	}
	if got := res.Points[4].Ratio; !math.IsNaN(got) {
		t.Errorf("failed point ratio = %v, want NaN", got)
	}
}

// TestPairedRatios: rounds pair by index (a round one side lacks is left
// out); the median and quartiles are the per-round ratios'.
func TestPairedRatios(t *testing.T) {
	base := []Round{{Round: 0, Value: 100}, {Round: 1, Value: 50}, {Round: 2, Value: 200}, {Round: 3, Value: 100}}
	c := []Round{{Round: 0, Value: 90}, {Round: 1, Value: 40}, {Round: 2, Value: 190}, {Round: 4, Value: 1}}
	p, err := PairedRatios(c, base)
	if err != nil {
		t.Fatal(err)
	}
	// 0.9, 0.8, 0.95: the unpaired medians would give 90/100 = 0.9 too,
	// the slow round 1 (both halved) pairs with itself.
	if p.N != 3 || p.Median != 0.9 || p.Q1 != 0.8 || p.Q3 != 0.95 {
		t.Errorf("paired %+v, want n 3, median 0.9, quartiles 0.8-0.95", p)
	}
	if _, err := PairedRatios(c, nil); err == nil {
		t.Error("no baseline rounds: want an error")
	}
}

// TestFastRatio: the mean of the fastest fifth (at least one) over the
// baseline's.
func TestFastRatio(t *testing.T) {
	xs := []float64{10, 50, 80, 90, 20, 30, 40, 60, 70, 100}
	base := []float64{100, 200, 150, 120, 110, 190, 180, 170, 160, 130}
	if got := FastRatio(xs, base); got != 95.0/195 {
		t.Errorf("FastRatio = %v, want %v", got, 95.0/195)
	}
	if got := FastRatio([]float64{3}, []float64{4, 6}); got != 0.5 {
		t.Errorf("one round each: %v, want 0.5", got)
	}
	if got := FastRatio(nil, base); !math.IsNaN(got) {
		t.Errorf("no rounds: %v, want NaN", got)
	}
}
