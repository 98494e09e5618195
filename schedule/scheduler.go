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
}

// Scheduler runs jobs. Its methods are safe for concurrent use.
type Scheduler struct {
	opts Options
	log  *zap.Logger
	jobs []*job

	mu      sync.Mutex
	state   int // 0 new, 1 started, 2 stopped
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	stopped chan struct{}
}

// job is a Job with its timetable and run state.
type job struct {
	Job
	plan    plan
	lock    string
	running atomic.Bool
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
	s := &Scheduler{opts: opts, log: opts.Logger, stopped: make(chan struct{})}
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
	s.ctx, s.cancel = context.WithCancel(context.Background())
	for _, j := range s.jobs {
		s.wg.Go(func() { s.loop(j) })
	}
	go func() { s.wg.Wait(); close(s.stopped) }()
	return nil
}

// Stop stops planning, cancels the ctx of the running jobs (an exclusive
// job then releases its lock) and waits for them to return, until ctx
// ends: it then returns ctx's error, the jobs finishing in the background.
// Stop on a Scheduler never started returns nil.
func (s *Scheduler) Stop(ctx context.Context) error {
	s.mu.Lock()
	state := s.state
	s.state = 2
	if state == 1 {
		s.cancel()
	}
	s.mu.Unlock()
	if state != 1 {
		return nil
	}
	select {
	case <-s.stopped:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("schedule: jobs still running at the stop deadline: %w", context.Cause(ctx))
	}
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
		if err := clock.SleepUntil(s.ctx, planned); err != nil {
			return
		}
		from = planned
		now := clock.Now()
		if late := now.Sub(planned); late > j.plan.hold(planned) {
			s.log.Warn("scheduled job missed an instant", zap.String("job", j.Name),
				zap.Time("planned", planned), zap.Duration("late", late))
			from = now
			continue
		}
		if !j.running.CompareAndSwap(false, true) {
			s.log.Warn("scheduled job still running, instant skipped", zap.String("job", j.Name), zap.Time("planned", planned))
			continue
		}
		s.wg.Go(func() {
			defer j.running.Store(false)
			s.fire(j, planned)
		})
	}
}
