package bench

import (
	"errors"
	"math"
	"sort"
)

// ErrNoSamples is returned when a statistic is asked of no samples.
var ErrNoSamples = errors.New("no samples")

// Summary is the spread of one case's per-round rates.
type Summary struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	Mean   float64 `json:"mean"`
}

// Summarize computes median, min, max and mean. The median of an even
// count is the mean of the two middle values.
func Summarize(xs []float64) (Summary, error) {
	if len(xs) == 0 {
		return Summary{}, ErrNoSamples
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	var sum float64
	for _, x := range s {
		sum += x
	}
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Summary{N: len(s), Median: m, Min: s[0], Max: s[len(s)-1], Mean: sum / float64(len(s))}, nil
}

// Ratio is x / base, or NaN when the base is not positive (a baseline that
// forwarded nothing cannot anchor a ratio).
func Ratio(x, base float64) float64 {
	if base <= 0 || math.IsNaN(base) {
		return math.NaN()
	}
	return x / base
}

// Percentile returns the p-th percentile (0..100) of xs by the
// nearest-rank method; xs need not be sorted.
func Percentile(xs []float64, p float64) (float64, error) {
	if len(xs) == 0 {
		return 0, ErrNoSamples
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	if rank < 1 {
		rank = 1
	}
	if rank > len(s) {
		rank = len(s)
	}
	return s[rank-1], nil
}

// Paired is the spread of a case's per-round ratios to the baseline's
// round of the same index. Rounds are interleaved, so a round of the case
// and the baseline's round of that index ran seconds apart: a slow spell
// of a shared host falls on both, and their ratio keeps less of it than
// the ratio of the two medians (docs/benchmarks.md "Method").
type Paired struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Q1     float64 `json:"q1"`
	Q3     float64 `json:"q3"`
}

// PairedRatios pairs the rounds of c and base by index (a round one of
// them lacks is left out) and summarizes c/base: median and quartiles
// (nearest rank).
func PairedRatios(c, base []Round) (Paired, error) {
	b := make(map[int]float64, len(base))
	for _, r := range base {
		b[r.Round] = r.Value
	}
	var rs []float64
	for _, r := range c {
		if v, ok := b[r.Round]; ok && v > 0 {
			rs = append(rs, r.Value/v)
		}
	}
	s, err := Summarize(rs)
	if err != nil {
		return Paired{}, err
	}
	q1, _ := Percentile(rs, 25)
	q3, _ := Percentile(rs, 75)
	return Paired{N: s.N, Median: s.Median, Q1: q1, Q3: q3}, nil
}

// FastRatio is the mean of the fastest fifth (at least one) of xs over
// the same of base. Noise on a shared host only ever slows a round down,
// so each case's fastest rounds are the steadiest estimate of what its
// code costs. Rates only (higher is better); NaN without samples.
func FastRatio(xs, base []float64) float64 {
	fast := func(v []float64) float64 {
		if len(v) == 0 {
			return math.NaN()
		}
		s := append([]float64(nil), v...)
		sort.Float64s(s)
		k := max(1, len(s)/5)
		var sum float64
		for _, x := range s[len(s)-k:] {
			sum += x
		}
		return sum / float64(k)
	}
	return Ratio(fast(xs), fast(base))
}
