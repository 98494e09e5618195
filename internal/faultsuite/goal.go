//go:build linux

package faultsuite

import (
	"fmt"
	"time"
)

// Connection-bound modes' goal (issue 18): the store frees a lock the
// moment it sees its connection end, so an unsignalled overlap is bounded,
// not forbidden.
const (
	ConnectionBoundP99 = 5 * time.Millisecond
	ConnectionBoundMax = 20 * time.Millisecond
)

// Missed returns the goals r misses for mode m, one line each (none: the
// run met every goal): no stale write accepted, no repeated or
// out-of-order fence, and no unsignalled overlap — or, in connection-bound
// modes, overlaps at most ConnectionBoundMax and ConnectionBoundP99 at p99.
func (m Mode) Missed(r Report) []string {
	var out []string
	if n := len(r.StaleWrites); n > 0 {
		out = append(out, fmt.Sprintf("%d stale-fence writes accepted (first: %+v)", n, r.StaleWrites[0]))
	}
	if n := len(r.Fences); n > 0 {
		out = append(out, fmt.Sprintf("%d repeated or out-of-order fences (first: %+v)", n, r.Fences[0]))
	}
	if len(r.Overlaps) == 0 {
		return out
	}
	ds := make([]time.Duration, len(r.Overlaps))
	longest := r.Overlaps[0]
	for i, o := range r.Overlaps {
		ds[i] = o.Duration
		if o.Duration > longest.Duration {
			longest = o
		}
	}
	if !m.ConnectionBound || longest.Duration > ConnectionBoundMax || P99(ds) > ConnectionBoundP99 {
		out = append(out, fmt.Sprintf("%d unsignalled overlaps (%s; longest: %s and %s on %s)",
			len(r.Overlaps), Dist(ds), longest.Earlier, longest.Later, longest.Lock))
	}
	return out
}
