// Package reclaim runs the SQL drivers' table-mode clean-up: a goroutine
// that deletes the rows of names no longer held, every half of the longest
// ttl its driver took a lock with, from that driver's first table-mode
// acquisition until it closes.
package reclaim

import (
	"context"
	"sync"
	"time"
)

// Bounds of the period.
const (
	MinEvery = 100 * time.Millisecond
	MaxEvery = time.Minute
)

// Loop calls a function periodically. Its zero value is ready; Note starts
// it, Stop ends it.
type Loop struct {
	mu      sync.Mutex
	every   time.Duration // 0: not started
	wake    chan struct{}
	ctx     context.Context // ends with Stop
	cancel  context.CancelFunc
	stopped bool
	wg      sync.WaitGroup
}

// Note records a lock taken with ttl: the first call starts calling run
// every ttl/2 (within MinEvery and MaxEvery), a shorter ttl shortens the
// period. run gets a context ending after one period or at Stop. Calls
// after Stop do nothing.
func (l *Loop) Note(ttl time.Duration, run func(context.Context)) {
	every := min(max(ttl/2, MinEvery), MaxEvery)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped || (l.every != 0 && l.every <= every) {
		return
	}
	first := l.every == 0
	l.every = every
	if first {
		l.wake = make(chan struct{}, 1)
		l.ctx, l.cancel = context.WithCancel(context.Background())
		l.wg.Add(1)
		go l.loop(run)
		return
	}
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

func (l *Loop) loop(run func(context.Context)) {
	defer l.wg.Done()
	for {
		l.mu.Lock()
		every := l.every
		l.mu.Unlock()
		t := time.NewTimer(every)
		select {
		case <-l.ctx.Done():
			t.Stop()
			return
		case <-l.wake:
			t.Stop()
			continue
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(l.ctx, every)
		run(ctx)
		cancel()
	}
}

// Stop ends the loop, cutting a run in progress (its context ends), and
// waits for it. Idempotent.
func (l *Loop) Stop() {
	l.mu.Lock()
	l.stopped = true
	started := l.every != 0
	l.mu.Unlock()
	if started {
		l.cancel()
		l.wg.Wait()
	}
}
