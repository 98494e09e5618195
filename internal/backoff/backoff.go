// Package backoff is mutexfx's one retry policy, used by every loop that
// retries: a waiting Acquire (component), the PostgreSQL driver's LISTEN
// reconnection, the SQL drivers' retries of a statement that met a
// deadlock or a lock timeout (with their own Start and Cap), the file
// driver's wait for a lock file's guard, and the etcd client's
// reconnection (gRPC's backoff.Config, built from the same numbers).
//
// The policy: the first delay is Start; each next one doubles (Factor), up
// to Cap; each delay slept is drawn uniformly from [d/2, d] (Jitter), so
// that callers that failed together do not retry together. A Backoff is
// reset to Start after a success that lasted.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// The policy's numbers.
const (
	// DefaultStart is the first delay when Policy.Start is zero: 50 ms
	// (also the component's default retryDelay).
	DefaultStart = 50 * time.Millisecond
	// DefaultCap is the largest delay when Policy.Cap is zero: 1 s, well
	// below any lock's ttl, so that a store that comes back is found
	// within a second.
	DefaultCap = time.Second
	// Factor is how much each delay grows over the one before.
	Factor = 2
	// Jitter is the fraction of each delay that is drawn at random: a
	// delay d is slept as a duration drawn from [d·(1−Jitter), d].
	Jitter = 0.5
)

// Policy is where a Backoff starts and how far it grows. The zero Policy
// is DefaultStart to DefaultCap.
type Policy struct {
	// Start is the first delay. Default (0): DefaultStart.
	Start time.Duration
	// Cap is the largest delay; a Start above Cap is its own cap.
	// Default (0): DefaultCap.
	Cap time.Duration
}

// Default is the policy of the retries that have no reason to start or
// stop elsewhere: 50 ms doubling to 1 s.
var Default = Policy{Start: DefaultStart, Cap: DefaultCap}

// Bounds returns the first delay and the largest: Start and Cap with
// their defaults, the cap never below the start.
func (p Policy) Bounds() (start, limit time.Duration) {
	start, limit = p.Start, p.Cap
	if start <= 0 {
		start = DefaultStart
	}
	if limit <= 0 {
		limit = DefaultCap
	}
	return start, max(start, limit)
}

// New returns a Backoff at the policy's first delay.
func (p Policy) New() Backoff {
	start, limit := p.Bounds()
	return Backoff{start: start, limit: limit, next: start}
}

// Backoff is the delays of one retry loop. It is not safe for concurrent
// use: each loop owns its own.
type Backoff struct {
	start, limit, next time.Duration
}

// Next returns the delay to sleep before the next attempt, jittered, and
// doubles the one after (up to the cap).
func (b *Backoff) Next() time.Duration {
	d := b.next
	b.next = min(Factor*b.next, b.limit)
	return jitter(d)
}

// Reset puts the Backoff back to its first delay, after a success.
func (b *Backoff) Reset() { b.next = b.start }

// Step returns the undrawn delay of the policy's attempt n (0 for the
// first retry): Start doubled n times, up to the cap. For a loop that
// keeps a failure count instead of a Backoff (draw it with Draw).
func (p Policy) Step(n int) time.Duration {
	start, limit := p.Bounds()
	d := start
	for range n {
		if d >= limit {
			break
		}
		d = min(Factor*d, limit)
	}
	return d
}

// Draw returns the delay slept for an undrawn delay d with the uniform
// draw u in [0, 1]: d·(1−Jitter·(1−u)), from d·(1−Jitter) at u = 0 to d
// at u = 1. Callers retrying together may share one draw so as to retry
// in one call.
func Draw(d time.Duration, u float64) time.Duration {
	return d - time.Duration(float64(d)*Jitter*(1-u))
}

// jitter returns a duration drawn uniformly from [d·(1−Jitter), d].
func jitter(d time.Duration) time.Duration {
	spread := time.Duration(float64(d) * Jitter)
	if spread <= 0 {
		return d
	}
	return d - spread + rand.N(spread+1)
}

// Sleep waits d, or less when ctx ends first; it reports whether it
// waited all of d (false: ctx ended, and the loop gives up).
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
