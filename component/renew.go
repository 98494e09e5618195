package component

import (
	"context"
	"errors"
	mrand "math/rand/v2"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/backoff"
	"go.uber.org/zap"
)

// schedule is the Mutex's one renewal goroutine. It renews held locks every
// third of their ttl, in batches (a Renewer renews a batch in few round
// trips), and loses a lock at its tracked expiry when no renewal succeeded
// in time — even when the store never answers, since the renewal calls run
// in goroutines of their own.
//
// A lock is in one renewal or Extend at a time (Lock.inflight), but batches
// of different locks may be in flight together: the locks that fall due
// while a batch is out form a batch of their own, so that one call hung on
// a dead connection holds up no other lock. And each call is bounded
// (renewContext): a hung call fails in time for its locks to be renewed by
// another before their expiry, when their ttl leaves time for that.
func (m *Mutex) schedule() {
	defer m.timer.Stop()
	done := make(chan struct{}, 1) // a batch ended: look again
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
			if l.inflight == nil { // (a renewal or Extend in flight renews it)
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
			next = now.Add(time.Hour)
			for _, l := range m.held {
				if l.state != stateHeld {
					continue
				}
				if l.inflight == nil && !now.Before(l.due.Add(-m.paceTTL(l, now)/6)) {
					l.inflight = sent
					batch = append(batch, l)
				}
				next = minTime(next, l.expiry)
				if l.inflight == nil {
					next = minTime(next, l.due)
				}
			}
			m.wg.Go(func() { m.renew(batch, sent, done) })
		}
		next = m.limitAttempts(now, next)
		// Set under m.mu: renewed and beginAttempt bring the timer
		// forward, under m.mu too, when a lock is due earlier.
		m.nextWake = next
		m.timer.Reset(time.Until(next))
		m.mu.Unlock()

		select {
		case <-m.timer.C:
		case <-done:
		case <-m.stop:
			return
		}
	}
}

// renew renews a batch of locks, marked in flight with sent, records the
// outcome and tells the scheduler on done.
func (m *Mutex) renew(batch []*Lock, sent chan struct{}, done chan<- struct{}) {
	defer func() {
		select {
		case done <- struct{}{}:
		default: // the scheduler has been told already
		}
	}()
	leases := make([]drivers.Lease, len(batch))
	expiries := make([]time.Time, len(batch))
	m.mu.Lock()
	for i, l := range batch {
		leases[i] = drivers.Lease{Key: l.key, Token: l.token, TTL: l.ttl}
		expiries[i] = l.expiry
	}
	m.mu.Unlock()

	// A lock's new expiry counts from when its call was sent.
	start := time.Now()
	var starts []time.Time // per lock, when each has a call of its own
	var results []drivers.RenewResult
	ends := make([]time.Time, len(leases)) // until when each request may land
	if m.renewer != nil {
		ctx, cancel := m.renewContext(start, leases, expiries)
		results = m.renewer.Renew(ctx, leases)
		cancel()
		deadline, _ := ctx.Deadline()
		for i := range ends {
			ends[i] = callEnd(deadline)
		}
		m.tel.renewed(start, results)
	} else {
		results = make([]drivers.RenewResult, len(leases))
		starts = make([]time.Time, len(leases))
		for i, le := range leases {
			starts[i] = time.Now()
			ctx, cancel := m.renewContext(starts[i], leases[i:i+1], expiries[i:i+1])
			ok, err := m.drv.Extend(ctx, le.Key, le.Token, le.TTL)
			cancel()
			deadline, _ := ctx.Deadline()
			ends[i] = callEnd(deadline)
			results[i] = drivers.RenewResult{Held: ok, Err: err}
			m.tel.renewed(starts[i], results[i:i+1])
		}
	}
	if len(results) != len(leases) {
		err := errors.New("driver returned a wrong number of renewal results")
		results = make([]drivers.RenewResult, len(leases))
		for i := range results {
			results[i].Err = err
		}
	}

	// One draw for the batch: its failed locks (with as many failures)
	// retry together, in one call, rather than each in a call of its own.
	u := mrand.Float64()
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
			m.tel.renewFailed(l)
			m.mayLand(l, leases[i].TTL, ends[i])
			l.failures++
			d := backoff.Policy{Start: m.opts.RetryDelay, Cap: maxRetryDelay}.Step(l.failures)
			if left := time.Until(l.expiry); d >= left {
				// The doubled delay would pass the expiry: retry
				// within half the time left instead, so that a short
				// ttl gets its retries, but no more often than every
				// tenth of the ttl or 20 ms, whichever is less.
				d = max(left/2, min(m.paceTTL(l, time.Now())/10, 20*time.Millisecond))
			}
			retry := backoff.Draw(d, u) // between d/2 and d
			l.due = time.Now().Add(retry)
			m.log.Warn("mutex renewal failed, retrying until the lock's expiry",
				zap.String("lock", l.name()), zap.Int("failures", l.failures),
				zap.Duration("expires_in", time.Until(l.expiry)), zap.Error(r.Err))
		case !r.Held:
			m.lose(l, CauseGoneOrTaken, "renewal found it gone or taken")
		case starts != nil:
			m.renewed(l, starts[i])
		default:
			m.renewed(l, start)
		}
	}
}

// renewContext bounds one renewal call, started at start, of leases whose
// tracked expiries are expiries. Each lease's bound is a third of its ttl,
// but never less than attemptGrace, and never past its expiry (its lock is
// lost then, whatever the store answers): so a call hung on a dead
// connection fails in time for a retry on another before the expiry, while
// a store that is slow but answers within a second keeps its locks however
// short their ttl. A batch's call runs to its latest lease's bound, so that
// a short-ttl lease does not cut the call of long-ttl ones; a lock whose
// expiry passes meanwhile is lost by the scheduler all the same.
func (m *Mutex) renewContext(start time.Time, leases []drivers.Lease, expiries []time.Time) (context.Context, context.CancelFunc) {
	var deadline time.Time
	for i, le := range leases {
		if b := minTime(expiries[i], start.Add(max(le.TTL/3, attemptGrace))); b.After(deadline) {
			deadline = b
		}
	}
	return context.WithDeadline(m.bg, deadline)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
