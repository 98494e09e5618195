package testutil

import (
	"sync/atomic"
	"testing"
	"time"
)

// Holds lets a fairness test decide, on its own goroutine, how long each
// worker keeps the lock it took: until the other workers are queued in the
// store behind it, which only polling the store tells. A worker calls Hold
// right after acquiring and Done when it takes no more turns; the test
// goroutine calls Serve.
type Holds struct {
	held     chan int
	release  []chan struct{}
	done     []atomic.Bool
	left     atomic.Int32
	finished chan struct{}
	stop     chan struct{}
}

// NewHolds returns the Holds of workers workers (numbered from 0). The
// workers still holding when t ends are let go.
func NewHolds(t testing.TB, workers int) *Holds {
	h := &Holds{held: make(chan int), release: make([]chan struct{}, workers), done: make([]atomic.Bool, workers),
		finished: make(chan struct{}), stop: make(chan struct{})}
	for w := range h.release {
		h.release[w] = make(chan struct{})
	}
	h.left.Store(int32(workers))
	t.Cleanup(func() { close(h.stop) })
	return h
}

// Hold blocks worker w, which holds the lock, until the test lets it go on
// (to release the lock).
func (h *Holds) Hold(w int) {
	select {
	case h.held <- w:
	case <-h.stop:
		return
	}
	select {
	case <-h.release[w]:
	case <-h.stop:
	}
}

// Done records that worker w takes no more turns.
func (h *Holds) Done(w int) {
	h.done[w].Store(true)
	if h.left.Add(-1) == 0 {
		close(h.finished)
	}
}

// IsDone reports whether worker w called Done.
func (h *Holds) IsDone(w int) bool { return h.done[w].Load() }

// Serve runs until every worker is done: each time a worker holds, it polls
// ready(holder) (Poll, failing the test after limit naming what), then lets
// the holder go on.
func (h *Holds) Serve(t testing.TB, limit time.Duration, what string, ready func(holder int) bool) {
	t.Helper()
	for {
		select {
		case w := <-h.held:
			Poll(t, limit, what, func() bool { return ready(w) })
			h.release[w] <- struct{}{}
		case <-h.finished:
			return
		}
	}
}
