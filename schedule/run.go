package schedule

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"go.uber.org/zap"

	"github.com/mutexfx/mutexfx/component"
)

// fire runs one planned instant of j.
func (s *Scheduler) fire(j *job, planned time.Time) {
	ctx := context.WithValue(s.ctx, plannedKey{}, planned)
	log := s.log.With(zap.String("job", j.Name), zap.Time("planned", planned))
	if !j.Exclusive {
		s.call(ctx, log, j)
		return
	}
	m, err := s.store(j)
	if err != nil {
		log.Error("exclusive job not run: its lock store is missing", zap.Error(err))
		s.count(j, OutcomeStoreError)
		return
	}
	defer s.checkSkew(ctx, log, j, m, planned)
	if s.tooLate(log, j, planned) {
		return
	}
	sent := time.Now()
	lock, err := m.TryAcquire(ctx, j.lock, component.WithTTL(j.ttl(planned)))
	switch {
	case errors.Is(err, component.ErrLocked):
		s.skipped(ctx, log, j, m, planned)
		return
	case err != nil && ctx.Err() != nil:
		return // stopping
	case err != nil:
		log.Error("exclusive job not run: its lock could not be tried",
			zap.String("lock", j.lock), zap.String("cause", "store error"), zap.Error(err))
		s.count(j, OutcomeStoreError)
		return
	}
	// The store granted the lock at some moment before its answer, maybe
	// after a holder ran the instant and released it at the end of its
	// hold: the same rule again, now that the answer came.
	if s.tooLate(log, j, planned, zap.Duration("attempt", time.Since(sent))) {
		releaseLate(ctx, log, j, lock)
		return
	}
	j.sawHolder("")
	s.runHeld(ctx, log, j, lock, planned.Add(j.plan.hold(planned)))
}

// releaseTimeout bounds the release of a lock got too late to run its
// instant.
const releaseTimeout = time.Second

// releaseLate releases lock, j's lock got too late to run with it, at
// once rather than leaving it to expire.
func releaseLate(ctx context.Context, log *zap.Logger, j *job, lock *component.Lock) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if _, err := lock.Release(rctx); err != nil {
		log.Debug("lock of a skipped instant not released: it expires after its ttl",
			zap.String("lock", j.lock), zap.Error(err))
	}
}

// tooLate reports whether the exclusive instant planned of j can no longer
// run here, logging and counting it as missed if so: the scheduler's clock
// reads more than half the hold past it. An instance whose clock is ahead
// holds the lock from its own instant until the hold ends by its clock,
// then releases it: at most half the hold late, while the instances'
// clocks differ by less than the other half, a lock found free was not
// released by a holder of this instant. fire asks before its attempt
// (then the attempt still has to reach the store in time) and again once
// it got the lock (the store granted it before it answered), so that an
// attempt answered late runs nothing: fields tell the attempt's time.
func (s *Scheduler) tooLate(log *zap.Logger, j *job, planned time.Time, fields ...zap.Field) bool {
	late, ok := s.inTime(planned, j.plan.hold(planned))
	if ok {
		return false
	}
	s.lost(log, j, OutcomeMissed, "exclusive job skipped an instant: too late to be sure no other instance ran it",
		append([]zap.Field{zap.Duration("late", late), zap.String("cause", "late")}, fields...)...)
	return true
}

// inTime returns how late the scheduler's clock reads past from, and
// whether by at most half of hold, the time the holders of a run starting
// at from keep its lock past from: a lock found free by then was not
// released by such a holder, their clocks (or the moments they took
// from) differing by less than the other half.
func (s *Scheduler) inTime(from time.Time, hold time.Duration) (time.Duration, bool) {
	late := s.opts.Clock.Now().Sub(from)
	return late, hold > 0 && late <= hold/2
}

// runHeld runs j holding lock, then keeps lock until the clock reads
// until (see hold).
func (s *Scheduler) runHeld(ctx context.Context, log *zap.Logger, j *job, lock *component.Lock, until time.Time) {
	log = log.With(zap.String("holder", holderID(lock.Token())), zap.Uint64("fence", lock.Fence()))
	_ = component.Run(ctx, lock, func(lctx context.Context, l *component.Lock) error {
		s.call(lctx, log, j)
		s.hold(j, l, until)
		return nil
	})
}

// call runs the job's function, recovering and logging a panic, and
// counts the run's outcome. A run whose ctx ended before it returned (the
// scheduler stopping, the lock lost) is logged at warn level as
// interrupted, with the cause, and counted so whatever it returned.
func (s *Scheduler) call(ctx context.Context, log *zap.Logger, j *job) {
	start := time.Now()
	outcome := OutcomeFailed
	defer func() {
		if ctx.Err() != nil {
			s.lost(log, j, OutcomeInterrupted, "scheduled job interrupted", zap.Duration("took", time.Since(start)),
				zap.NamedError("cause", context.Cause(ctx)))
			return
		}
		s.count(j, outcome)
	}()
	defer func() {
		if p := recover(); p != nil {
			log.Error("scheduled job panicked", zap.Any("panic", p), zap.ByteString("stack", debug.Stack()))
		}
	}()
	if err := j.Run(ctx); err != nil {
		log.Error("scheduled job failed", zap.Duration("took", time.Since(start)), zap.Error(err))
		return
	}
	outcome = OutcomeRan
	log.Debug("scheduled job done", zap.Duration("took", time.Since(start)))
}

// store finds the lock store of exclusive job j.
func (s *Scheduler) store(j *job) (*component.Mutex, error) {
	r := s.opts.Resolver
	switch {
	case j.Store != "" && r == nil:
		return nil, fmt.Errorf("%w: store %q named but no Options.Resolver", ErrNoStore, j.Store)
	case j.Store != "":
		m, err := r.Get(j.Store)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNoStore, err)
		}
		return m, nil
	case s.opts.Mutex != nil:
		return s.opts.Mutex, nil
	}
	if d, ok := r.(defaulter); ok {
		m, err := d.Default()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNoStore, err)
		}
		return m, nil
	}
	return nil, fmt.Errorf("%w: set Options.Mutex, Options.Resolver or Job.Store", ErrNoStore)
}
