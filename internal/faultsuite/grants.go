//go:build linux

package faultsuite

import "sort"

// span is a half-open interval of CLOCK_MONOTONIC nanoseconds.
type span struct{ from, to int64 }

// grant is one holder's tenure as the history shows it.
type grant struct {
	holder, proc, lock string
	fence              uint64
	start              int64 // Acquired
	lost               int64 // told lost; 0 if never
	ended              int64 // its Mutex ended it as lost (Ended); 0 if never
	lastWrite          int64 // the register took its last write (or refused it)
	end                int64 // when it stopped believing it holds (see believed)
	killed             bool  // its process was killed while it held
	believed           []span
	resumeLag          int64 // paused past the loss: SIGCONT to told lost; -1 if not
}

// procLife is what the parent did to one process incarnation.
type procLife struct {
	killed int64 // 0 if never
	stops  []span
}

// grants rebuilds every grant from the history. A grant's believed spans
// are when its holder could act on it: from Acquired to the first of told
// lost, Releasing, its process's death or the history's end — less the
// times its process was stopped. A process stopped while holding and told
// lost only after SIGCONT lost the lock while frozen: its belief ends at
// the SIGSTOP (it could not act, nor be told, in between), and the time
// from SIGCONT to being told is its resume lag (what it does in that lag
// is the fence's to guard).
func grants(h []Event) (map[string][]*grant, map[string]*procLife) {
	procs := map[string]*procLife{}
	life := func(p string) *procLife {
		if procs[p] == nil {
			procs[p] = &procLife{}
		}
		return procs[p]
	}
	byHolder := map[string]*grant{}
	byFence := map[fenceKey]*grant{}
	var order []*grant
	var last int64
	for _, e := range h {
		last = max(last, e.T)
		switch e.Kind {
		case Killed:
			if l := life(e.Proc); l.killed == 0 {
				l.killed = e.T
			}
		case Stopped:
			l := life(e.Proc)
			l.stops = append(l.stops, span{e.T, 0})
		case Continued:
			l := life(e.Proc)
			if n := len(l.stops); n > 0 && l.stops[n-1].to == 0 {
				l.stops[n-1].to = e.T
			}
		case Acquired:
			g := &grant{holder: e.Holder, proc: e.Proc, lock: e.Lock, fence: e.Fence, start: e.T, resumeLag: -1}
			byHolder[e.Holder] = g
			byFence[fenceKey{e.Proc, e.Lock, e.Fence}] = g
			order = append(order, g)
		case Lost:
			if g := byHolder[e.Holder]; g != nil && g.lost == 0 {
				g.lost = e.T
			}
		case Ended:
			if g := byFence[fenceKey{e.Proc, e.Lock, e.Fence}]; g != nil && g.ended == 0 {
				g.ended = e.T
			}
		case Write:
			if g := byHolder[e.Holder]; g != nil {
				g.lastWrite = max(g.lastWrite, e.T)
			}
		case Releasing:
			if g := byHolder[e.Holder]; g != nil && g.end == 0 {
				g.end = e.T
			}
		}
	}
	out := map[string][]*grant{}
	for _, g := range order {
		g.lost = told(g)
		l := life(g.proc)
		end := last
		if g.end != 0 {
			end = g.end
		}
		if g.lost != 0 && g.lost < end {
			end = g.lost
		}
		if l.killed != 0 && l.killed > g.start && l.killed < end {
			end, g.killed = l.killed, true
		}
		for i, s := range l.stops {
			to := s.to
			if to == 0 {
				to = last
				l.stops[i].to = last
			}
			// (a stop stamped before the grant's own stamp took effect
			// after it: the parent stamps SIGSTOP as it sends it, and the
			// process may still run a moment, so its belief ends at once)
			if to > g.start && s.from < end && g.lost != 0 && g.lost >= to {
				g.resumeLag = g.lost - to
				end = max(s.from, g.start)
				break
			}
		}
		g.end = end
		g.believed = minus(span{g.start, end}, l.stops)
		out[g.lock] = append(out[g.lock], g)
	}
	for _, gs := range out {
		sort.Slice(gs, func(i, j int) bool { return gs[i].start < gs[j].start })
	}
	return out, procs
}

// fenceKey names a grant by its process, lock and fence, as an Ended
// event does.
type fenceKey struct {
	proc, lock string
	fence      uint64
}

// told is when g's holder was told lost: when its Mutex ended the lock
// (from then on Lock.Err, which the holder asks before each write, returns
// an error), or after its last write if that came later (a write checked
// just before), or when the holder saw it (Lost) if sooner; 0 if never. A
// holder starved of CPU sees its loss late, but writes nothing meanwhile.
func told(g *grant) int64 {
	if g.ended == 0 {
		return g.lost
	}
	t := max(g.ended, g.lastWrite)
	if g.lost != 0 {
		t = min(t, g.lost)
	}
	return t
}

// minus returns s less the spans cut (sorted by from, not overlapping).
func minus(s span, cut []span) []span {
	out := []span{s}
	for _, c := range cut {
		var next []span
		for _, o := range out {
			if c.to <= o.from || c.from >= o.to {
				next = append(next, o)
				continue
			}
			if c.from > o.from {
				next = append(next, span{o.from, c.from})
			}
			if c.to < o.to {
				next = append(next, span{c.to, o.to})
			}
		}
		out = next
	}
	return out
}

// intersect returns the first instant and the total length of the
// intersection of two span lists.
func intersect(a, b []span) (first, total int64) {
	first = -1
	for _, x := range a {
		for _, y := range b {
			from, to := max(x.from, y.from), min(x.to, y.to)
			if to > from {
				if first < 0 || from < first {
					first = from
				}
				total += to - from
			}
		}
	}
	return first, total
}
