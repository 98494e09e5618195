//go:build linux

package faultsuite

import (
	"fmt"
	"sort"
	"time"
)

// Overlap is two holders of one lock at one instant, neither told lost.
type Overlap struct {
	Lock string
	// Earlier and Later are the holders, by acquisition.
	Earlier, Later string
	// At is when the overlap began (CLOCK_MONOTONIC ns).
	At int64
	// Duration is how long both believed they held the lock.
	Duration time.Duration
}

// StaleWrite is a write the register accepted from a holder after it had
// accepted one from a later holder of the same lock.
type StaleWrite struct {
	Lock           string
	Holder, Newer  string
	Fence, NewerFn uint64
	Seq            int64
}

// FenceFault is a grant whose fence is not above that of a grant that
// ended before it began (OutOfOrder) or equals another holder's (Repeat).
type FenceFault struct {
	Lock           string
	Earlier, Later string
	Fence, Prior   uint64
	Repeat         bool
}

// Report is what Check finds in a history.
type Report struct {
	Grants, WritesOK, WritesRefused, AcquireErrors int
	// Unnoticed counts releases that found the lock no longer theirs
	// although the holder had not been told it was lost.
	Unnoticed int
	// Faults counts the faults injected by name.
	Faults map[string]int

	StaleWrites []StaleWrite
	Overlaps    []Overlap
	Fences      []FenceFault

	// Margins are, for each holder told lost, the time from being told to
	// the next grant of the lock to someone else (negative: an overlap).
	Margins []time.Duration
	// Recoveries are, for each lock held by a killed process, the time from
	// the SIGKILL to the next grant of the lock.
	Recoveries []time.Duration
	// ResumeLags are, for each holder paused past its loss, the time from
	// SIGCONT to being told lost.
	ResumeLags []time.Duration
}

// Check reads a history (in any order: it is sorted by T, the register's
// writes by Seq) and reports what it finds.
func Check(h []Event) Report {
	h = append([]Event(nil), h...)
	sort.SliceStable(h, func(i, j int) bool { return h[i].T < h[j].T })
	r := Report{Faults: map[string]int{}}
	byLock, procs := grants(h)
	told := map[string]int{}
	for _, e := range h {
		switch e.Kind {
		case Acquired:
			r.Grants++
		case AcquireError:
			r.AcquireErrors++
		case Write:
			if e.OK {
				r.WritesOK++
			} else {
				r.WritesRefused++
			}
		case Released:
			if !e.OK && e.Detail == "" && told[e.Holder] == 0 { // a failed release (Detail: its error) proves nothing
				r.Unnoticed++
			}
		case Lost:
			told[e.Holder]++
		case Killed:
			r.Faults["kill"]++
		case Stopped:
			r.Faults["pause"]++
		case Fault:
			r.Faults[e.Detail]++
		}
	}
	byHolder := map[string]*grant{}
	for _, gs := range byLock {
		for _, g := range gs {
			byHolder[g.holder] = g
		}
		r.Overlaps = append(r.Overlaps, overlaps(gs)...)
		r.Fences = append(r.Fences, fenceFaults(gs)...)
		r.Margins = append(r.Margins, margins(gs)...)
		for _, g := range gs {
			if g.resumeLag >= 0 {
				r.ResumeLags = append(r.ResumeLags, time.Duration(g.resumeLag))
			}
		}
	}
	r.Recoveries = recoveries(byLock, procs)
	r.StaleWrites = staleWrites(h, byHolder)
	sort.Slice(r.Overlaps, func(i, j int) bool { return r.Overlaps[i].At < r.Overlaps[j].At })
	return r
}

// overlaps finds the pairs of grants (sorted by start) whose believed
// spans intersect.
func overlaps(gs []*grant) []Overlap {
	var out []Overlap
	for i, a := range gs {
		for _, b := range gs[i+1:] {
			if b.start >= a.end {
				continue
			}
			if at, d := intersect(a.believed, b.believed); d > 0 {
				out = append(out, Overlap{Lock: a.lock, Earlier: a.holder, Later: b.holder, At: at, Duration: time.Duration(d)})
			}
		}
	}
	return out
}

// fenceFaults finds repeated fences and fences not above that of a grant
// that had ended before the grant began.
func fenceFaults(gs []*grant) []FenceFault {
	var out []FenceFault
	seen := map[uint64]*grant{}
	for i, b := range gs {
		if b.fence == 0 {
			continue
		}
		if a := seen[b.fence]; a != nil {
			out = append(out, FenceFault{Lock: b.lock, Earlier: a.holder, Later: b.holder, Fence: b.fence, Prior: a.fence, Repeat: true})
			continue
		}
		seen[b.fence] = b
		var prior *grant
		for _, a := range gs[:i] {
			if a.fence != 0 && a.end <= b.start && (prior == nil || a.fence > prior.fence) {
				prior = a
			}
		}
		if prior != nil && b.fence < prior.fence {
			out = append(out, FenceFault{Lock: b.lock, Earlier: prior.holder, Later: b.holder, Fence: b.fence, Prior: prior.fence})
		}
	}
	return out
}

// margins: for each grant told lost, the next grant to another holder
// after its own start, less the time it was told.
func margins(gs []*grant) []time.Duration {
	var out []time.Duration
	for i, a := range gs {
		if a.lost == 0 || a.resumeLag >= 0 || a.killed {
			continue
		}
		if i+1 < len(gs) {
			out = append(out, time.Duration(gs[i+1].start-a.lost))
		}
	}
	return out
}

// recoveries: for each grant cut by its process's death, the time from
// the kill to the lock's next grant.
func recoveries(byLock map[string][]*grant, procs map[string]*procLife) []time.Duration {
	var out []time.Duration
	for _, gs := range byLock {
		for i, a := range gs {
			if !a.killed {
				continue
			}
			kill := procs[a.proc].killed
			for _, b := range gs[i+1:] {
				if b.start > kill {
					out = append(out, time.Duration(b.start-kill))
					break
				}
			}
		}
	}
	return out
}

// staleWrites walks each lock's accepted writes in the register's order:
// one from a holder that began before the holder of an earlier accepted
// write is stale — the register should have refused it.
func staleWrites(h []Event, byHolder map[string]*grant) []StaleWrite {
	var ws []Event
	for _, e := range h {
		if e.Kind == Write && e.OK {
			ws = append(ws, e)
		}
	}
	sort.SliceStable(ws, func(i, j int) bool { return ws[i].Seq < ws[j].Seq })
	newest := map[string]*grant{}
	var out []StaleWrite
	for _, w := range ws {
		g := byHolder[w.Holder]
		if g == nil {
			continue
		}
		n := newest[w.Lock]
		switch {
		case n == nil || g.start > n.start:
			newest[w.Lock] = g
		case g.start < n.start:
			out = append(out, StaleWrite{Lock: w.Lock, Holder: g.holder, Newer: n.holder, Fence: w.Fence, NewerFn: n.fence, Seq: w.Seq})
		}
	}
	return out
}

// Violations counts the safety violations: stale writes accepted, fence
// faults and unsignalled overlaps longer than allowed (0: any).
func (r Report) Violations(allowed time.Duration) int {
	n := len(r.StaleWrites) + len(r.Fences)
	for _, o := range r.Overlaps {
		if o.Duration > allowed {
			n++
		}
	}
	return n
}

// Summary is a one-paragraph account of the report.
func (r Report) Summary() string {
	od := make([]time.Duration, len(r.Overlaps))
	for i, o := range r.Overlaps {
		od[i] = o.Duration
	}
	return fmt.Sprintf("grants %d, writes %d accepted / %d refused, acquire errors %d, releases of a lock lost unnoticed %d, faults %v\n"+
		"stale writes accepted %d, fence faults %d, unsignalled overlaps %d (%s)\n"+
		"lost-before-regrant margin %s\nrecovery after kill %s\nresume lag %s",
		r.Grants, r.WritesOK, r.WritesRefused, r.AcquireErrors, r.Unnoticed, r.Faults,
		len(r.StaleWrites), len(r.Fences), len(r.Overlaps), Dist(od),
		Dist(r.Margins), Dist(r.Recoveries), Dist(r.ResumeLags))
}

// Dist describes durations: count, min, p50, p99, max.
func Dist(ds []time.Duration) string {
	if len(ds) == 0 {
		return "n=0"
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	q := func(p float64) time.Duration { return s[int(p*float64(len(s)-1))] }
	r := func(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }
	return fmt.Sprintf("n=%d min %v p50 %v p99 %v max %v", len(s), r(s[0]), r(q(0.5)), r(q(0.99)), r(s[len(s)-1]))
}

// P99 returns the 99th percentile of ds (0 for none).
func P99(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(0.99*float64(len(s)-1))]
}
