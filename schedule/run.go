package schedule

import (
	"context"
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
		return
	}
	// An instance whose clock is ahead has held the lock since its own
	// planned instant and releases it hold later by its clock: an attempt
	// this late could find it released already and run the instant again.
	// Up to half the hold late, the instances' clocks may differ by up to
	// the other half (less the store's answer time).
	if late := s.opts.Clock.Now().Sub(planned); late > j.plan.hold(planned)/2 {
		log.Warn("exclusive job skipped an instant: too late to be sure no other instance ran it", zap.Duration("late", late))
		return
	}
	lock, err := m.TryAcquire(ctx, j.lock)
	switch {
	case err != nil && ctx.Err() != nil:
		return // stopping
	case err != nil:
		log.Error("exclusive job not run: its lock could not be tried", zap.String("lock", j.lock), zap.Error(err))
		return
	case lock == nil:
		log.Debug("exclusive job run by another instance, skipped", zap.String("lock", j.lock))
		return
	}
	_ = component.Run(ctx, lock, func(lctx context.Context, l *component.Lock) error {
		s.call(lctx, log, j)
		s.hold(l, planned.Add(j.plan.hold(planned)))
		return nil
	})
}

// hold keeps l until the clock reads until, so that instances whose clocks
// are late find it held and skip the instant. The scheduler's stop does
// not end it (those instances still run); l ending (lost) and the end of
// a Stop's ctx do (see Stop).
func (s *Scheduler) hold(l *component.Lock, until time.Time) {
	ctx, cancel := context.WithCancel(s.holds)
	defer cancel()
	defer context.AfterFunc(l.Context(), cancel)()
	_ = s.opts.Clock.SleepUntil(ctx, until)
}

// call runs the job's function, recovering and logging a panic.
func (s *Scheduler) call(ctx context.Context, log *zap.Logger, j *job) {
	defer func() {
		if p := recover(); p != nil {
			log.Error("scheduled job panicked", zap.Any("panic", p), zap.ByteString("stack", debug.Stack()))
		}
	}()
	start := time.Now()
	if err := j.Run(ctx); err != nil {
		log.Error("scheduled job failed", zap.Duration("took", time.Since(start)), zap.Error(err))
		return
	}
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
