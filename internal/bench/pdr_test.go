package bench

import (
	"context"
	"errors"
	"math"
	"testing"
)

// simDUT forwards up to capacity pps and drops the excess: loss is
// (rate - capacity) / rate above capacity, 0 below, the textbook
// single-queue overload the RFC 2544 search is meant to find.
func simDUT(capacity float64, trials *int) Trial {
	return func(_ context.Context, rate float64) (float64, error) {
		*trials++
		if rate <= capacity {
			return 0, nil
		}
		return (rate - capacity) / rate, nil
	}
}

func TestSearchPDR(t *testing.T) {
	tests := []struct {
		name               string
		max, cap, thr, res float64
	}{
		{"no drop rate", 1e6, 400e3, 0, 1e3},
		{"0.5% partial drop rate", 1e6, 400e3, 0.005, 1e3},
		{"capacity above max", 1e6, 2e6, 0.005, 1e3},
		{"capacity near zero", 1e6, 1e3, 0, 100},
		{"10% threshold", 3.7e6, 860e3, 0.1, 1e4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var n int
			got, steps, err := SearchPDR(context.Background(),
				SearchParams{Max: tt.max, Threshold: tt.thr, Resolution: tt.res, MaxTrials: 40}, simDUT(tt.cap, &n))
			if err != nil {
				t.Fatal(err)
			}
			// The true answer: the highest rate whose loss is within the
			// threshold, capacity / (1 - threshold), capped at max.
			want := math.Min(tt.max, tt.cap/(1-tt.thr))
			if got > want+1e-6 || want-got > tt.res {
				t.Errorf("SearchPDR = %.0f, want within %.0f below %.0f (steps %+v)", got, tt.res, want, steps)
			}
			if len(steps) != n {
				t.Errorf("%d steps recorded, %d trials run", len(steps), n)
			}
			for _, s := range steps {
				if s.Pass != (s.Loss <= tt.thr) {
					t.Errorf("step %+v: pass flag disagrees with threshold %v", s, tt.thr)
				}
				if s.Pass && s.Rate > got {
					t.Errorf("passing step %.0f above the result %.0f", s.Rate, got)
				}
			}
		})
	}
}

func TestSearchPDRTrialCap(t *testing.T) {
	var n int
	_, steps, err := SearchPDR(context.Background(), SearchParams{Max: 1e6, Threshold: 0, Resolution: 1e-9, MaxTrials: 5}, simDUT(123456, &n))
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 5 || n != 5 {
		t.Errorf("ran %d trials, want the cap of 5", n)
	}
}

func TestSearchPDRErrors(t *testing.T) {
	var n int
	for _, p := range []SearchParams{
		{Max: 0, Threshold: 0, Resolution: 1},
		{Max: 1, Threshold: 1, Resolution: 1},
		{Max: 1, Threshold: -0.1, Resolution: 1},
		{Max: 1, Threshold: 0, Resolution: 0},
	} {
		if _, _, err := SearchPDR(context.Background(), p, simDUT(1, &n)); !errors.Is(err, ErrBadSearch) {
			t.Errorf("SearchPDR(%+v) err = %v, want ErrBadSearch", p, err)
		}
	}
	boom := errors.New("boom")
	_, _, err := SearchPDR(context.Background(), SearchParams{Max: 1, Resolution: 0.1},
		func(context.Context, float64) (float64, error) { return 0, boom })
	if !errors.Is(err, boom) {
		t.Errorf("trial error not wrapped: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := SearchPDR(ctx, SearchParams{Max: 1, Resolution: 0.1}, simDUT(1, &n)); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled search err = %v", err)
	}
}
