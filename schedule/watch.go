package schedule

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
)

// watchSlack is how long past a holding's expected expiry the watcher
// looks again, for the store to have expired it.
const watchSlack = 20 * time.Millisecond

// watch follows the holding of j's lock key found at the skipped instant
// planned (info, by a look sent at seen) until it ends or the scheduler
// stops, and tells how it ended:
//   - a lock that expires (Features.Expiring) is renewed every third of
//     its ttl while its holder lives, so its remaining ttl never runs
//     out: one that does (the lock gone when its remaining ttl has passed
//     since the last look was sent) was not renewed — its holder died,
//     was paused or was cut off from the store (counted from the look's
//     answer instead, a slow answer would make an expiry read as a
//     release);
//   - a session lock (no ttl) is kept until the end of its hold: one
//     freed before three quarters of the hold ended with its session.
//
// Either way the instant is logged at warn level as interrupted, and run
// again here once when Job.RerunInterrupted is set. A holding released
// by its holder is not logged. The watcher looks every third of the job's
// ttl, and just after the remaining ttl when that is shorter.
func (s *Scheduler) watch(log *zap.Logger, j *job, m *component.Mutex, ins drivers.Inspector, key string, planned time.Time, info drivers.LockInfo, seen time.Time) {
	ttl := j.ttl(planned)
	end := planned.Add(j.plan.hold(planned) * 3 / 4)
	wait := func(info drivers.LockInfo) time.Duration {
		if info.TTL > 0 {
			return min(ttl/3, info.TTL+watchSlack)
		}
		return ttl / 3
	}
	next := seen.Add(wait(info))
	timer := time.NewTimer(time.Until(next))
	defer timer.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-timer.C:
		}
		sent := time.Now()
		cur, held, err := ins.Inspect(s.ctx, key)
		now := time.Now()
		switch {
		case err != nil && s.ctx.Err() != nil:
			return
		case err != nil:
			log.Debug("exclusive job's holder could not be inspected", zap.Error(err))
			timer.Reset(ttl / 3)
			continue
		case held && cur.Token == info.Token && info.TTL == 0 && !s.opts.Clock.Now().Before(end):
			return // a session lock held past end: nothing more to tell
		case held && cur.Token == info.Token:
			info, seen = cur, sent
			timer.Reset(time.Until(seen.Add(wait(info))))
			continue
		}
		var cause string
		switch {
		case info.TTL > 0 && now.Sub(seen) >= info.TTL:
			cause = "its lock expired: the instance running it stopped renewing it (crashed, paused or cut off from the store)"
		case info.TTL == 0 && s.opts.Clock.Now().Before(end):
			cause = "its lock was freed before the end of its hold: the session of the instance running it ended (crashed or cut off from the store)"
		default:
			return // released by its holder
		}
		s.lost(log, j, OutcomeInterruptedElsewhere, "exclusive job's instant interrupted on another instance", zap.String("cause", cause),
			zap.Bool("rerun", j.RerunInterrupted))
		if j.RerunInterrupted {
			s.rerun(log, j, m, planned)
		}
		return
	}
}

// rerun runs the interrupted instant planned of j once more, here, if
// this instance gets j's lock (one attempt) and is not running j. The
// re-run keeps the lock until rerunUntil. As at an instant, an attempt
// answered past half that window (a slow store) runs nothing: the
// instances noticing the interruption within half the window of each
// other, a lock found free by then was not released by another re-run.
func (s *Scheduler) rerun(log *zap.Logger, j *job, m *component.Mutex, planned time.Time) {
	if !j.running.CompareAndSwap(false, true) {
		s.lost(log, j, OutcomeRerunSkipped, "interrupted instant not run again: the job is running here", zap.String("cause", "running"))
		return
	}
	defer j.running.Store(false)
	from := s.opts.Clock.Now()
	until := j.plan.rerunUntil(planned, from)
	if s.rerunLate(log, j, from, until) {
		return
	}
	ctx := context.WithValue(s.ctx, plannedKey{}, planned)
	sent := time.Now()
	lock, err := m.TryAcquire(ctx, j.lock, component.WithTTL(j.ttl(planned)))
	switch {
	case errors.Is(err, component.ErrLocked):
		log.Info("interrupted instant run again by another instance, or the next one started")
		return
	case err != nil && ctx.Err() != nil:
		return
	case err != nil:
		log.Error("interrupted instant not run again: its lock could not be tried", zap.Error(err))
		return
	}
	if s.rerunLate(log, j, from, until, zap.Duration("attempt", time.Since(sent))) {
		releaseLate(ctx, log, j, lock)
		return
	}
	log = log.With(zap.Bool("rerun", true))
	log.Info("running an interrupted instant again")
	s.count(j, OutcomeRerun)
	s.runHeld(ctx, log, j, lock, until)
}

// rerunLate reports whether a re-run of j noticed at from, keeping its
// lock until until, can no longer start here, logging and counting it as
// skipped if so (see inTime); fields tell the attempt's time.
func (s *Scheduler) rerunLate(log *zap.Logger, j *job, from, until time.Time, fields ...zap.Field) bool {
	late, ok := s.inTime(from, until.Sub(from))
	if ok {
		return false
	}
	s.lost(log, j, OutcomeRerunSkipped, "interrupted instant not run again: too late to be sure no other instance ran it again",
		append([]zap.Field{zap.Duration("late", late), zap.String("cause", "late")}, fields...)...)
	return true
}
