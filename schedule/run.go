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
	// An instance whose clock is ahead has held the lock since its own
	// planned instant and releases it hold later by its clock: an attempt
	// this late could find it released already and run the instant again.
	// Up to half the hold late, the instances' clocks may differ by up to
	// the other half (less the store's answer time).
	if late := s.opts.Clock.Now().Sub(planned); late > j.plan.hold(planned)/2 {
		s.lost(log, j, OutcomeMissed, "exclusive job skipped an instant: too late to be sure no other instance ran it",
			zap.Duration("late", late), zap.String("cause", "late"))
		return
	}
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
	j.sawHolder("")
	s.runHeld(ctx, log, j, lock, planned)
}

// runHeld runs j holding lock for planned, then keeps lock until the hold
// ends.
func (s *Scheduler) runHeld(ctx context.Context, log *zap.Logger, j *job, lock *component.Lock, planned time.Time) {
	log = log.With(zap.String("holder", holderID(lock.Token())), zap.Uint64("fence", lock.Fence()))
	_ = component.Run(ctx, lock, func(lctx context.Context, l *component.Lock) error {
		s.call(lctx, log, j)
		s.hold(j, l, planned.Add(j.plan.hold(planned)))
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
