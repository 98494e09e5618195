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
// modes, overlaps at most ConnectionBoundMax and ConnectionBoundP99 at p99 of
// the faults that end connections.
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
	// The p99 is over the faults that end connections (the issue's "at
	// p99 when the connection is reset or its backend killed"): a fault
	// after which no overlap was seen counts as a zero.
	all := ds
	if n := r.Faults["reset"] + r.Faults["backend"]; n > len(all) {
		all = append(make([]time.Duration, n-len(all)), ds...)
	}
	// Under 100 such faults a p99 is only the maximum: a short run checks
	// the maximum bound alone.
	p99Over := len(all) >= 100 && P99(all) > ConnectionBoundP99
	if !m.ConnectionBound || longest.Duration > ConnectionBoundMax || p99Over {
		out = append(out, fmt.Sprintf("%d unsignalled overlaps (%s; longest: %s and %s on %s)",
			len(r.Overlaps), Dist(ds), longest.Earlier, longest.Later, longest.Lock))
	}
	return out
}
