package schedule

import (
	"context"
	"time"
)

// Clock is the scheduler's time: when it plans a job's instants and waits
// for them. Inject one to test with skewed clocks; the lock stores keep
// their own time.
type Clock interface {
	// Now returns the clock's current time.
	Now() time.Time
	// SleepUntil returns nil once the clock reads t or later, or ctx's
	// error when ctx ends first. An ended ctx wins even when t has passed.
	SleepUntil(ctx context.Context, t time.Time) error
}

// SystemClock is the host's wall clock.
var SystemClock Clock = OffsetClock(0)

// OffsetClock is the host's wall clock plus a fixed offset: an instance
// whose clock is ahead (positive) or behind (negative). Tests use it to
// simulate the clock skew between instances.
type OffsetClock time.Duration

// Now returns the wall clock plus the offset.
func (c OffsetClock) Now() time.Time { return time.Now().Add(time.Duration(c)) }

// maxSleep bounds one timer so that a step of the wall clock (NTP, a
// suspended host) delays an instant by at most this much.
const maxSleep = 30 * time.Second

// SleepUntil waits until Now() reads t, re-reading the wall clock at least
// every 30 s. It returns ctx's cause as soon as ctx has ended, even when t
// has passed already.
func (c OffsetClock) SleepUntil(ctx context.Context, t time.Time) error {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		d := t.Sub(c.Now())
		if d <= 0 {
			return nil
		}
		d = min(d, maxSleep)
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-timer.C:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}
