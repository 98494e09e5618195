// Package schedule runs jobs at aligned intervals (Every) or cron times
// (Cron), optionally exclusive: each instant run by one instance of the
// application, the one that gets the job's lock. It is managed by fx
// (Module) or used directly (New, Start, Stop).
package schedule

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/mutexfx/mutexfx/component"
)

// Resolver finds a lock store by name. *mutexfx.Registry implements it.
type Resolver interface {
	Get(name string) (*component.Mutex, error)
}

// defaulter is implemented by resolvers that know a default store.
type defaulter interface {
	Default() (*component.Mutex, error)
}

// ErrNoStore reports an exclusive job whose lock store cannot be found.
var ErrNoStore = errors.New("schedule: no lock store")

// ErrStopped is the cause of the end of a run's ctx when the scheduler
// stops.
var ErrStopped = errors.New("schedule: scheduler stopped")

// ErrState reports Start on a started or stopped Scheduler.
var ErrState = errors.New("schedule: scheduler already started or stopped")

// Options configure a Scheduler.
type Options struct {
	// Mutex is the lock store of the exclusive jobs without Job.Store.
	// Default: the Resolver's default store.
	Mutex *component.Mutex

	// Resolver finds the stores named by Job.Store: a *mutexfx.Registry.
	// Default: none.
	Resolver Resolver

	// Clock plans the instants and waits for them.
	// Default: SystemClock.
	Clock Clock

	// Location is the time zone of cron expressions without CRON_TZ.
	// Default: time.Local.
	Location *time.Location

	// Logger logs runs skipped, failed or panicking.
	// Default: no logging.
	Logger *zap.Logger

	// MeterProvider records MetricInstants (docs/telemetry.md).
	// Default: otel.GetMeterProvider(), a no-op until the application
	// sets one.
	MeterProvider metric.MeterProvider
}

// Scheduler runs jobs. Its methods are safe for concurrent use.
type Scheduler struct {
	opts     Options
	log      *zap.Logger
	instants metric.Int64Counter
	jobs     []*job

	mu      sync.Mutex
	state   int                // 0 new, 1 started, 2 stopped
	holding map[*job]time.Time // the holds going, and their ends
	ctx     context.Context
	cancel  context.CancelCauseFunc
	wg      sync.WaitGroup
	stopped chan struct{}

	// holds ends the holds of the exclusive runs (see hold): when a
	// Stop's ctx ends, or all runs ended. Stop does not end it.
	holds    context.Context
	endHolds context.CancelFunc
}

// job is a Job with its timetable and run state.
type job struct {
	Job
	plan     plan
	lock     string
	running  atomic.Bool
	watching atomic.Bool // a watch of another instance's holding is going
	skew     skewCheck

	mu         sync.Mutex
	lastHolder string // token of the holder found at the last instant
}

// New validates the jobs and returns a Scheduler that runs them once
// started. An invalid job fails with an error wrapping ErrInvalidJob and
// naming the job: among others, a cron expression that never fires (such
// as "0 0 30 2 *", 30 February) is refused here.
func New(opts Options, jobs ...Job) (*Scheduler, error) {
	if opts.Clock == nil {
		opts.Clock = SystemClock
	}
	if opts.Location == nil {
		opts.Location = time.Local
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	s := &Scheduler{opts: opts, log: opts.Logger, instants: newInstants(opts.MeterProvider), stopped: make(chan struct{})}
	names := map[string]bool{}
	now := opts.Clock.Now()
	for _, j := range jobs {
		p, err := j.plan(opts.Location, now)
		if err != nil {
			return nil, err
		}
		if names[j.Name] {
			return nil, fmt.Errorf("%w: job %q: Name: declared twice", ErrInvalidJob, j.Name)
		}
		names[j.Name] = true
		if j.Key == "" {
			j.Key = j.Name
		}
		s.jobs = append(s.jobs, &job{Job: j, plan: p, lock: LockPrefix + j.Key})
	}
	return s, nil
}

// Start starts planning the jobs and returns at once; the first instants
// are the next ones after now. ctx is not used past the call.
func (s *Scheduler) Start(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != 0 {
		return ErrState
	}
	s.state = 1
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	s.holds, s.endHolds = context.WithCancel(context.Background())
	for _, j := range s.jobs {
		s.wg.Go(func() { s.loop(j) })
	}
	go func() {
		s.wg.Wait()
		s.endHolds()
		close(s.stopped)
	}()
	return nil
}

// maxStopMargin bounds the time Stop keeps before its ctx's deadline for
// the release of the locks whose hold the deadline cuts short.
const maxStopMargin = time.Second

// Stop stops planning, cancels the ctx of the running jobs and waits for
// them to return, until ctx ends: it then returns ctx's error, the jobs
// finishing in the background. No run starts once Stop is called.
//
// An exclusive run keeps its lock past the end of its job until its hold
// ends (half the period, 30 s at most, past the planned instant), so that
// an instance whose clock is late does not run the same instant again; a
// stop does not cut the hold short, so Stop may take up to the hold. The
// holds end early, and their locks are released, a tenth of the time left
// (1 s at most) before ctx's deadline, or when ctx ends: then an instance
// late by more than the time between the instant and that moment may run
// the instant again. Give Stop at least the hold to avoid that. A Stop
// still waiting for a hold after a second logs it at warn level.
//
// Every Stop after a successful Start waits for the runs (a second Stop
// too); Stop on a Scheduler never started returns nil.
func (s *Scheduler) Stop(ctx context.Context) error {
	s.mu.Lock()
	if s.state == 1 {
		s.cancel(ErrStopped)
	}
	s.state = 2
	started := s.ctx != nil
	s.mu.Unlock()
	if !started {
		return nil
	}
	hctx, cancel := holdsBound(ctx)
	defer cancel()
	defer context.AfterFunc(hctx, s.endHolds)()
	warn := time.AfterFunc(stopWarnAfter, s.warnHolds)
	defer warn.Stop()
	select {
	case <-s.stopped:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("schedule: jobs still running at the stop deadline: %w", context.Cause(ctx))
	}
}

// holdsBound returns the ctx whose end ends the holds of the exclusive
// runs during a Stop given ctx: ctx, ending a margin before its deadline
// so that the locks are released by then.
func holdsBound(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	margin := min(time.Until(deadline)/10, maxStopMargin)
	return context.WithDeadline(ctx, deadline.Add(-margin))
}

// loop plans j's instants until the scheduler stops. Each instant starts a
// run unless the previous run of j is still going (runs never stack). An
// instant the scheduler wakes up for too late (past its hold window: the
// process was suspended, the clock stepped) is skipped: another instance
// may have run it already. A job with no next instant (a cron expression
// that stopped matching, the clock stepped years ahead) stops planning and
// logs an error. The loop checks the scheduler's ctx at every instant, so it
// stops even with a Clock whose SleepUntil returns at once for past times.
func (s *Scheduler) loop(j *job) {
	clock := s.opts.Clock
	from := clock.Now()
	for s.ctx.Err() == nil {
		planned := j.plan.next(from)
		if planned.IsZero() {
			s.log.Error("scheduled job has no next instant: no more runs", zap.String("job", j.Name), zap.Time("after", from))
			return
		}
		// A Clock may wake up for a past instant after s.ctx ended.
		if err := clock.SleepUntil(s.ctx, planned); err != nil || s.ctx.Err() != nil {
			return
		}
		from = planned
		now := clock.Now()
		if late := now.Sub(planned); late > j.plan.hold(planned) {
			s.lost(s.log, j, OutcomeMissed, "scheduled job missed an instant", zap.String("job", j.Name),
				zap.Time("planned", planned), zap.Duration("late", late), zap.String("cause", "late"))
			from = now
			continue
		}
		if !s.startRun(j, planned) {
			return
		}
	}
}

// startRun starts the run of j for planned unless the scheduler is
// stopping (false): Stop cancels s.ctx under s.mu, so no run starts with
// an ended ctx. An instant reached while j's previous run is still going
// is skipped (true).
func (s *Scheduler) startRun(j *job, planned time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		return false
	}
	if !j.running.CompareAndSwap(false, true) {
		s.lost(s.log, j, OutcomeSkippedRunning, "scheduled job still running, instant skipped", zap.String("job", j.Name),
			zap.Time("planned", planned), zap.String("cause", "running"))
		return true
	}
	s.wg.Go(func() {
		defer j.running.Store(false)
		s.fire(j, planned)
	})
	return true
}
