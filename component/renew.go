package component

import (
	"context"
	"errors"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"go.uber.org/zap"
)

// schedule is the Mutex's one renewal goroutine. It renews held locks every
// third of their ttl, in batches (a Renewer renews a batch in few round
// trips), and loses a lock at its tracked expiry when no renewal succeeded
// in time — even when the store never answers, since the renewal calls run
// in their own goroutine, one batch at a time.
func (m *Mutex) schedule() {
	defer m.timer.Stop()
	done := make(chan struct{}, 1)
	inflight := false
	for {
		m.mu.Lock()
		now := time.Now()
		next := now.Add(time.Hour)
		due := false
		for _, l := range m.held {
			if l.state != stateHeld {
				continue
			}
			if m.expireLocked(l, now) {
				continue
			}
			next = minTime(next, l.expiry)
			if !inflight && l.inflight == nil { // (an Extend renews it meanwhile)
				due = due || !now.Before(l.due)
				next = minTime(next, l.due)
			}
		}
		if due {
			// Renew every lock due within the next sixth of its ttl too:
			// early renewals are harmless and they gather the locks into
			// few batches.
			var batch []*Lock
			sent := make(chan struct{})
			for _, l := range m.held {
				if l.state == stateHeld && l.inflight == nil && !now.Before(l.due.Add(-l.ttl/6)) {
					l.inflight = sent
					batch = append(batch, l)
				}
			}
			inflight = true
			m.wg.Go(func() { m.renew(batch, sent, done) })
		}
		// Set under m.mu: renewed brings the timer forward, under m.mu
		// too, when a lock is due earlier.
		m.nextWake = next
		m.timer.Reset(time.Until(next))
		m.mu.Unlock()

		select {
		case <-m.timer.C:
		case <-done:
			inflight = false
		case <-m.stop:
			return
		}
	}
}

// renew renews a batch of locks, marked in flight with sent, and records
// the outcome.
func (m *Mutex) renew(batch []*Lock, sent chan struct{}, done chan<- struct{}) {
	defer func() { done <- struct{}{} }()
	leases := make([]drivers.Lease, len(batch))
	m.mu.Lock()
	deadline := batch[0].expiry
	for i, l := range batch {
		leases[i] = drivers.Lease{Key: l.key, Token: l.token, TTL: l.ttl}
		deadline = minTime(deadline, l.expiry)
	}
	m.mu.Unlock()

	// The call must not outlive the first expiry: past it the lock is lost
	// whatever the store answers.
	ctx, cancel := context.WithDeadline(m.bg, deadline)
	defer cancel()
	start := time.Now()
	var results []drivers.RenewResult
	if m.renewer != nil {
		results = m.renewer.Renew(ctx, leases)
	} else {
		results = make([]drivers.RenewResult, len(leases))
		for i, le := range leases {
			ok, err := m.drv.Extend(ctx, le.Key, le.Token, le.TTL)
			results[i] = drivers.RenewResult{Held: ok, Err: err}
		}
	}
	if len(results) != len(leases) {
		err := errors.New("driver returned a wrong number of renewal results")
		results = make([]drivers.RenewResult, len(leases))
		for i := range results {
			results[i].Err = err
		}
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	close(sent)
	for i, l := range batch {
		l.inflight = nil
		if l.state != stateHeld {
			continue
		}
		switch r := results[i]; {
		case r.Err != nil:
			l.failures++
			retry := jitter(min(m.opts.RetryDelay<<min(l.failures, 10), maxRetryDelay))
			l.due = time.Now().Add(retry)
			m.log.Warn("mutex renewal failed, retrying until the lock's expiry",
				zap.String("lock", l.name), zap.Int("failures", l.failures),
				zap.Duration("expires_in", time.Until(l.expiry)), zap.Error(r.Err))
		case !r.Held:
			m.lose(l, "renewal found it gone or taken")
		default:
			m.renewed(l, start)
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
