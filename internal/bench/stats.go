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
