package bench

import (
	"context"
	"errors"
	"fmt"
)

// ErrBadSearch is returned for search parameters that cannot converge.
var ErrBadSearch = errors.New("bad search parameters")

// Trial offers traffic at rate (packets per second) for one trial and
// returns the fraction of offered packets that were lost (0..1).
type Trial func(ctx context.Context, rate float64) (loss float64, err error)

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
	Rate float64 `json:"rate"`
	Loss float64 `json:"loss"`
	Pass bool    `json:"pass"`
}

// SearchPDR finds the highest offered rate whose loss stays within the
// threshold by binary search (RFC 2544 section 26.1; RFC 1242 section 3.17
// defines throughput as the highest rate with no loss, seed 001 relaxes it
// to a partial drop rate). It first tries Max; if that passes, Max is the
// answer. It returns the best passing rate (0 if none) and the trials.
func SearchPDR(ctx context.Context, p SearchParams, trial Trial) (float64, []SearchStep, error) {
	if p.Max <= 0 || p.Threshold < 0 || p.Threshold >= 1 || p.Resolution <= 0 {
		return 0, nil, fmt.Errorf("search pdr: %w", ErrBadSearch)
	}
	if p.MaxTrials <= 0 {
		p.MaxTrials = 20
	}
	var steps []SearchStep
	lo, hi, best := 0.0, p.Max, 0.0
	rate := p.Max
	for len(steps) < p.MaxTrials {
		if err := ctx.Err(); err != nil {
			return best, steps, fmt.Errorf("search pdr: %w", err)
		}
		loss, err := trial(ctx, rate)
		if err != nil {
			return best, steps, fmt.Errorf("search pdr at %.0f pps: %w", rate, err)
		}
		pass := loss <= p.Threshold
		steps = append(steps, SearchStep{Rate: rate, Loss: loss, Pass: pass})
		if pass {
			best, lo = rate, rate
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
	return best, steps, nil
}
