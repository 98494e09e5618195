package kit

import "time"

// Pacer paces the attempts of a waiting Acquire that keeps its turn in the
// store's queue by retrying (Features.BlockingWait): it ends the wait at
// its deadline and owns the one timer of the wait. Call Stop when done.
type Pacer struct {
	deadline time.Time
	timer    *time.Timer
}

// NewPacer returns the pacing of a wait of the given length, from now.
func NewPacer(wait time.Duration) *Pacer { return NewPacerFrom(time.Now(), wait) }

// NewPacerFrom returns the pacing of a wait of the given length that began
// at start (a wait whose first attempt ran before the pacer was needed).
func NewPacerFrom(start time.Time, wait time.Duration) *Pacer {
	return &Pacer{deadline: start.Add(wait)}
}

// PollDelay is the delay before a waiting Acquire's next attempt when no
// wake-up comes: every (the driver's poll interval, normally
// drivers.WaitPollInterval), or just past the holder's remaining ttl when
// that ends first (holderTTL 0: not told).
func PollDelay(holderTTL, every time.Duration) time.Duration {
	if holderTTL > 0 && holderTTL < every {
		return holderTTL + time.Millisecond
	}
	return every
}

// After returns a channel that receives once delay has passed, or at the
// deadline if sooner, and false when the deadline has passed: the wait is
// over.
func (p *Pacer) After(delay time.Duration) (<-chan time.Time, bool) {
	left := time.Until(p.deadline)
	if left <= 0 {
		return nil, false
	}
	delay = min(delay, left)
	if p.timer == nil {
		p.timer = time.NewTimer(delay)
	} else {
		p.timer.Reset(delay) // Go 1.23+ timers: no stale value to drain
	}
	return p.timer.C, true
}

// Stop releases the timer.
func (p *Pacer) Stop() {
	if p.timer != nil {
		p.timer.Stop()
	}
}
