// Package stats holds what the benchmark programs share: percentiles of
// measured durations.
package stats

import (
	"slices"
	"time"
)

// Percentile returns the p-th percentile (0–100) of ds, nearest rank below;
// 0 for no samples. It sorts ds in place.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[int(float64(len(ds)-1)*p/100)]
}
