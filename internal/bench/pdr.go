package bench

import (
	"context"
	"errors"
	"fmt"
)

// ErrBadSearch is returned for search parameters that cannot converge.
var ErrBadSearch = errors.New("bad search parameters")

// ErrNoPass is returned when no trial of a PDR search stayed within the
// loss threshold.
var ErrNoPass = errors.New("no passing rate")

// ErrShort is returned when no trial of a PDR search passed because the
// generator fell short of every target rate (a busy machine), whatever
// the loss: the DUT was never measured at the rates asked for, which is
// not a loss failure.
var ErrShort = errors.New("generator fell short of every target rate")

// ShortfallTolerance is how far below its target rate a trial may offer
// and still count: a trial whose generator achieved less than
// (1 - ShortfallTolerance) x target did not test the target rate, so it
// is marked Short and does not pass.
const ShortfallTolerance = 0.05

// TrialResult is what one trial measured.
type TrialResult struct {
	// Offered is the rate the generator actually achieved (pps).
	Offered float64
	// Loss is the fraction of offered packets lost (0..1).
	Loss float64
}

// Trial offers traffic at target rate (packets per second) for one trial
// and returns the rate actually offered and the loss.
type Trial func(ctx context.Context, rate float64) (TrialResult, error)

// SearchParams bound an RFC 2544 throughput search.
type SearchParams struct {
	// Max is the highest rate tried (the generator's or the max-rate
	// mode's measured rate).
	Max float64
	// Threshold is the acceptable loss fraction: 0 is the RFC 2544 no-drop
	// rate, 0.005 the 0.5% partial drop rate seed 001 uses.
	Threshold float64
	// Resolution stops the search when hi-lo falls below it (pps).
	Resolution float64
	// MaxTrials caps the number of trials.
	MaxTrials int
}

// SearchStep is one trial of the search.
type SearchStep struct {
	// Target is the rate asked of the generator, Rate the offered rate it
	// achieved (what the trial measured).
	Target float64 `json:"target"`
	Rate   float64 `json:"rate"`
	Loss   float64 `json:"loss"`
	Pass   bool    `json:"pass"`
	// Short marks a trial whose generator fell more than
	// ShortfallTolerance below Target; it never passes.
	Short bool `json:"short,omitempty"`
}

// SearchPDR finds the highest offered rate whose loss stays within the
// threshold by binary search on the target rate (RFC 2544 section 26.1;
// RFC 1242 section 3.17 defines throughput as the highest rate with no
// loss, seed 001 relaxes it to a partial drop rate). It first tries Max;
// if that passes, the search ends. It returns the best passing step's
// achieved rate (0 if none passed) and the trials.
func SearchPDR(ctx context.Context, p SearchParams, trial Trial) (float64, []SearchStep, error) {
	if p.Max <= 0 || p.Threshold < 0 || p.Threshold >= 1 || p.Resolution <= 0 {
		return 0, nil, fmt.Errorf("search pdr: %w", ErrBadSearch)
	}
	if p.MaxTrials <= 0 {
		p.MaxTrials = 20
	}
	var steps []SearchStep
	lo, hi := 0.0, p.Max
	rate := p.Max
	for len(steps) < p.MaxTrials {
		if err := ctx.Err(); err != nil {
			return bestRate(steps), steps, fmt.Errorf("search pdr: %w", err)
		}
		tr, err := trial(ctx, rate)
		if err != nil {
			return bestRate(steps), steps, fmt.Errorf("search pdr at %.0f pps: %w", rate, err)
		}
		short := tr.Offered < rate*(1-ShortfallTolerance)
		pass := !short && tr.Loss <= p.Threshold
		steps = append(steps, SearchStep{Target: rate, Rate: tr.Offered, Loss: tr.Loss, Pass: pass, Short: short})
		if pass {
			lo = rate
			if rate == p.Max {
				break
			}
		} else {
			hi = rate
		}
		if hi-lo < p.Resolution {
			break
		}
		rate = (lo + hi) / 2
	}
	return bestRate(steps), steps, nil
}

// BestStep returns the index of the passing step with the highest
// achieved rate, -1 if none passed.
func BestStep(steps []SearchStep) int {
	best := -1
	for i, s := range steps {
		if s.Pass && (best < 0 || s.Rate > steps[best].Rate) {
			best = i
		}
	}
	return best
}

func bestRate(steps []SearchStep) float64 {
	if i := BestStep(steps); i >= 0 {
		return steps[i].Rate
	}
	return 0
}
