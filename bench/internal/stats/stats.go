// Package stats holds what the benchmark programs share: percentiles of
// measured durations.
package stats

import (
	"math"
	"slices"
	"time"
)

// Percentile returns the p-th percentile (0–100) of ds by nearest rank: the
// smallest sample with at least p % of the samples at or below it (the
// smallest sample for p = 0); 0 for no samples. It sorts ds in place.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	rank := int(math.Ceil(p / 100 * float64(len(ds))))
	return ds[min(max(rank-1, 0), len(ds)-1)]
}

// Median returns the median of ds: the middle sample, or the mean of the
// two middle ones for an even count; 0 for no samples. It sorts ds in
// place. For the medians of a few repeated runs.
func Median(ds []time.Duration) time.Duration {
	n := len(ds)
	if n == 0 {
		return 0
	}
	slices.Sort(ds)
	if n%2 == 1 {
		return ds[n/2]
	}
	return (ds[n/2-1] + ds[n/2]) / 2
}
