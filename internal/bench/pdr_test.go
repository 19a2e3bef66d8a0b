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
	return func(_ context.Context, rate float64) (TrialResult, error) {
		*trials++
		if rate <= capacity {
			return TrialResult{Offered: rate}, nil
		}
		return TrialResult{Offered: rate, Loss: (rate - capacity) / rate}, nil
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
		func(context.Context, float64) (TrialResult, error) { return TrialResult{}, boom })
	if !errors.Is(err, boom) {
		t.Errorf("trial error not wrapped: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := SearchPDR(ctx, SearchParams{Max: 1, Resolution: 0.1}, simDUT(1, &n)); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled search err = %v", err)
	}
}

// A generator that cannot reach the target: every step records the rate
// achieved, not the one asked for; a step well below its target never
// passes (it did not test that rate), one just below does, and the
// result is an achieved rate.
func TestSearchPDRAchievedRate(t *testing.T) {
	const genTop, capacity = 600e3, 500e3
	var trials int
	dut := simDUT(capacity, &trials)
	gen := func(ctx context.Context, rate float64) (TrialResult, error) {
		// The generator loses 2% to pacing and tops out at genTop.
		tr, err := dut(ctx, min(rate*0.98, genTop))
		return tr, err
	}
	best, steps, err := SearchPDR(context.Background(), SearchParams{Max: 1e6, Threshold: 0.005, Resolution: 1e3, MaxTrials: 40}, gen)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) == 0 || !steps[0].Short || steps[0].Pass || steps[0].Target != 1e6 || steps[0].Rate != genTop {
		t.Fatalf("first step %+v: want target 1e6, achieved %v, short, not passing", steps, genTop)
	}
	bi := BestStep(steps)
	if bi < 0 || steps[bi].Rate != best {
		t.Fatalf("BestStep = %d, best %v, steps %+v", bi, best, steps)
	}
	want := capacity / (1 - 0.005)
	if best > want+1e-6 || want-best > 2e3 {
		t.Errorf("PDR = %.0f, want an achieved rate just below %.0f (steps %+v)", best, want, steps)
	}
	for _, s := range steps {
		if s.Short != (s.Rate < s.Target*(1-ShortfallTolerance)) || (s.Short && s.Pass) {
			t.Errorf("step %+v: short flag wrong", s)
		}
		if s.Rate != min(s.Target*0.98, genTop) {
			t.Errorf("step %+v: rate is not the achieved one", s)
		}
	}
	if BestStep([]SearchStep{{Rate: 1}, {Rate: 2, Short: true}}) != -1 {
		t.Errorf("BestStep found a pass among failures")
	}
}

// The pdr round carries the best passing trial's counters (loss, wall
// rate), its achieved rate as the value, and the max-rate trial's rate.
func TestPDRRound(t *testing.T) {
	top := Round{OfferedPPS: 900e3, PPS: 700e3, Loss: 0.2}
	trials := []Round{
		{OfferedPPS: 880e3, PPS: 700e3, Loss: 0.2},
		{OfferedPPS: 450e3, PPS: 449e3, Loss: 0.001},
		{OfferedPPS: 670e3, PPS: 660e3, Loss: 0.01},
	}
	steps := []SearchStep{
		{Target: 900e3, Rate: 880e3, Loss: 0.2},
		{Target: 450e3, Rate: 450e3, Loss: 0.001, Pass: true},
		{Target: 675e3, Rate: 670e3, Loss: 0.01},
	}
	rd, err := pdrRound(top, trials, steps, 0.005)
	if err != nil {
		t.Fatal(err)
	}
	if rd.Value != 450e3 || rd.Loss != 0.001 || rd.PPS != 449e3 || rd.MaxOfferedPPS != 900e3 || len(rd.Steps) != 3 {
		t.Errorf("pdr round %+v", rd)
	}
	if _, err := pdrRound(top, trials[:1], steps[:1], 0.005); !errors.Is(err, ErrNoPass) {
		t.Errorf("no passing step: err = %v", err)
	}
}

// replay is a Trial that answers from recorded steps (target rate ->
// achieved rate and loss), as a live run measured them: the search logic
// is then tested on real measurements without timing in the test.
func replay(t *testing.T, rec []SearchStep) Trial {
	i := 0
	return func(_ context.Context, rate float64) (TrialResult, error) {
		if i >= len(rec) {
			t.Fatalf("search asked for trial %d at %.0f pps; only %d recorded", i+1, rate, len(rec))
		}
		r := rec[i]
		i++
		if math.Abs(r.Target-rate) > 1 {
			t.Fatalf("trial %d: search asked for %.0f pps, the recording was at %.0f", i, rate, r.Target)
		}
		return TrialResult{Offered: r.Rate, Loss: r.Loss}, nil
	}
}

// TestPDRRecordedSteps replays PDR searches recorded on this 2-core
// machine (TestBenchPDR, layout two, threshold 5%). On an idle machine
// the search converges on a passing step; while another job ran, the
// generator offered ~85% of every target: every step was short, and
// the round was reported as a loss failure ("no trial within loss 0.05")
// although no step lost anything. It must be reported as ErrShort.
func TestPDRRecordedSteps(t *testing.T) {
	p := SearchParams{Max: 1.2e6, Threshold: 0.05, Resolution: 24e3, MaxTrials: 12}
	type rec = SearchStep
	idle := []rec{
		{Target: 1.2e6, Rate: 1.19e6, Loss: 0.31},
		{Target: 600e3, Rate: 598e3, Loss: 0},
		{Target: 900e3, Rate: 893e3, Loss: 0.071},
		{Target: 750e3, Rate: 747e3, Loss: 0.012},
		{Target: 825e3, Rate: 821e3, Loss: 0.038},
		{Target: 862500, Rate: 859e3, Loss: 0.055},
		{Target: 843750, Rate: 840e3, Loss: 0.049},
	}
	busy := []rec{
		{Target: 1.2e6, Rate: 1.01e6, Loss: 0},
		{Target: 600e3, Rate: 507e3, Loss: 0},
		{Target: 300e3, Rate: 256e3, Loss: 0},
		{Target: 150e3, Rate: 129e3, Loss: 0},
		{Target: 75e3, Rate: 64e3, Loss: 0},
		{Target: 37500, Rate: 31e3, Loss: 0},
		{Target: 18750, Rate: 16e3, Loss: 0},
	}
	lossy := []rec{
		{Target: 1.2e6, Rate: 1.19e6, Loss: 0.4},
		{Target: 600e3, Rate: 598e3, Loss: 0.2},
		{Target: 300e3, Rate: 299e3, Loss: 0.1},
		{Target: 150e3, Rate: 150e3, Loss: 0.09},
		{Target: 75e3, Rate: 75e3, Loss: 0.08},
		{Target: 37500, Rate: 37500, Loss: 0.07},
		{Target: 18750, Rate: 18750, Loss: 0.06},
	}
	for _, tt := range []struct {
		name    string
		rec     []rec
		want    float64
		wantErr error
	}{
		{"idle", idle, 840e3, nil},
		{"busy: generator short", busy, 0, ErrShort},
		{"lossy DUT", lossy, 0, ErrNoPass},
	} {
		t.Run(tt.name, func(t *testing.T) {
			best, steps, err := SearchPDR(context.Background(), p, replay(t, tt.rec))
			if err != nil {
				t.Fatal(err)
			}
			if len(steps) != len(tt.rec) || best != tt.want {
				t.Fatalf("%d steps, best %.0f; want %d, %.0f: %+v", len(steps), best, len(tt.rec), tt.want, steps)
			}
			trials := make([]Round, len(steps))
			for i, s := range steps {
				trials[i] = Round{OfferedPPS: s.Rate, Loss: s.Loss}
			}
			rd, err := pdrRound(Round{OfferedPPS: steps[0].Rate}, trials, steps, p.Threshold)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("pdrRound error = %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr == ErrShort && errors.Is(err, ErrNoPass) {
				t.Errorf("a short generator is reported as a loss failure: %v", err)
			}
			if err == nil && (rd.Value != tt.want || rd.Loss > p.Threshold) {
				t.Errorf("round %+v", rd)
			}
		})
	}
}
