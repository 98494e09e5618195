package schedule

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mutexfx/mutexfx/component"
)

// ErrInvalidJob reports a Job that cannot be scheduled; the error names the
// job and the field.
var ErrInvalidJob = errors.New("schedule: invalid job")

// LockPrefix is put before a job's Key to name its lock: "schedule:<key>".
const LockPrefix = "schedule:"

// Job is a scheduled piece of work. Exactly one of Every and Cron is set.
type Job struct {
	// Name identifies the job in logs; unique within a Scheduler. Required.
	Name string

	// Every runs the job at every multiple of this period since the Unix
	// epoch (every 5m: at :00, :05, :10...), so that every instance plans
	// the same instants. At least 1 ms.
	Every time.Duration

	// Cron runs the job at the times of a standard 5-field cron expression
	// ("0 3 * * *"), or a descriptor (@hourly, @daily, @weekly, @monthly,
	// @yearly), parsed by github.com/robfig/cron/v3. A "CRON_TZ=Area/City "
	// prefix sets its time zone; else Options.Location. @every is refused:
	// use Every. An expression that never fires ("0 0 30 2 *") is refused.
	//
	// Across daylight-saving changes a fixed-time job (minute and hour
	// fields not starting with '*') runs once a day, as in Vixie cron: a
	// wall time the clocks skip runs at the change ("30 2 * * *" at 03:00
	// EDT in New York on the spring-forward day), a wall time they repeat
	// runs at its first occurrence only ("30 1 * * *" at 01:30 EDT, not
	// again at 01:30 EST). A job with '*' in its minute or hour field
	// ("*/15 * * * *", "0 * * * *", @hourly) follows the clock: no run in
	// the skipped hour, runs in both passes of the repeated one.
	Cron string

	// Exclusive runs each instant in one instance only: the instance that
	// gets the lock "schedule:<Key>" (one attempt, no wait) runs it, the
	// others skip it. After a short run the lock is kept until half the
	// period (30 s at most) past the planned instant, so that an instance
	// whose clock is late skips that instant too.
	// Default: false (every instance runs every instant).
	Exclusive bool

	// Key names the exclusive job's lock, after "schedule:".
	// Default: Name.
	Key string

	// Store names the lock store of an exclusive job, found with
	// Options.Resolver. When it cannot be found the job does not run and
	// each skipped instant logs the error.
	// Default: Options.Mutex, else the Resolver's default store.
	Store string

	// TTL is the time to live of an exclusive job's lock, renewed (every
	// TTL/3) while the job runs and during the hold: when the process
	// running it dies, the lock is free TTL after its last renewal at
	// most, and the next instant runs elsewhere. From 10 ms to 100 years.
	// Default: a quarter of the period (of the time to the next instant
	// for Cron), at least 1 s, at most 30 s.
	TTL time.Duration

	// RerunInterrupted re-runs, once, an instant whose exclusive run was
	// interrupted by the crash of the instance running it (its lock
	// expired instead of being released) or by the loss of its lock: an
	// instance that skipped the instant and saw it end so runs it again,
	// with Planned the original instant. The re-run is not re-run. It
	// keeps the lock a hold past the moment it noticed (not into the last
	// half hold before the next instant); an instance noticing in that last
	// half hold, or whose attempt is answered past half that window, skips
	// the re-run, lest another instance have re-run it already. The
	// instant then runs at least once, possibly twice (the interrupted
	// run may have done part or all of its work): make the job
	// idempotent. Default: false (at most once).
	RerunInterrupted bool

	// Run is the work. Its ctx ends when the scheduler stops and, for an
	// exclusive job, when its lock is lost (cause wrapping
	// component.ErrLost); it carries the planned instant (Planned) and the
	// lock (component.LockFrom). A panic is recovered and logged. Required.
	Run func(ctx context.Context) error
}

// plan is a validated Job's timetable.
type plan struct {
	every time.Duration
	cron  *cronPlan
}

// plan validates j and returns its timetable, cron expressions read in loc
// (unless CRON_TZ is given). A cron expression with no instant in the five
// years after now is refused: it would never fire.
func (j Job) plan(loc *time.Location, now time.Time) (plan, error) {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: job %q: %s: %s", ErrInvalidJob, j.Name, field, fmt.Sprintf(format, args...))
	}
	switch {
	case j.Name == "":
		return plan{}, fmt.Errorf("%w: Name is required", ErrInvalidJob)
	case j.Run == nil:
		return plan{}, bad("Run", "required")
	case (j.Every != 0) == (j.Cron != ""):
		return plan{}, bad("Every/Cron", "set exactly one")
	case j.TTL != 0 && (j.TTL < minTTL || j.TTL > component.MaxTTL):
		return plan{}, bad("TTL", "must be from %v to 100 years, got %v", minTTL, j.TTL)
	case j.Every != 0 && j.Every < time.Millisecond:
		return plan{}, bad("Every", "must be at least 1ms, got %v", j.Every)
	case j.Every != 0:
		return plan{every: j.Every}, nil
	case strings.HasPrefix(strings.TrimSpace(j.Cron), "@every"):
		return plan{}, bad("Cron", "%v", errEvery)
	}
	c, err := parseCron(j.Cron, loc)
	if err != nil {
		return plan{}, bad("Cron", "%v", err)
	}
	p := plan{cron: c}
	if p.next(now).IsZero() {
		return plan{}, bad("Cron", "%q never fires (no instant in the 5 years after %s)", j.Cron, now.Format(time.DateOnly))
	}
	return p, nil
}

// next returns the first planned instant strictly after t, or the zero
// time when a cron expression has none in the five years after t.
func (p plan) next(t time.Time) time.Time {
	if p.every > 0 {
		n := t.UnixNano()/int64(p.every) + 1
		return time.Unix(0, n*int64(p.every))
	}
	return p.cron.next(t)
}

// maxHold bounds the hold of an exclusive run.
const maxHold = 30 * time.Second

// hold is how long past planned an exclusive run keeps its lock: half the
// time to the next instant, 30 s at most (30 s when there is no next
// instant).
func (p plan) hold(planned time.Time) time.Duration {
	return min(p.period(planned)/2, maxHold)
}

// rerunUntil is when a re-run of the instant planned, noticed interrupted
// at from, releases its lock after a short run: a hold past from, so that
// the instances noticing the interruption a little later find it held,
// but no later than half the next instant's hold before that instant,
// whose attempts an instance with a clock ahead makes that early.
func (p plan) rerunUntil(planned, from time.Time) time.Time {
	until := from.Add(p.hold(planned))
	if next := p.next(from); !next.IsZero() && next.Add(-p.hold(next)/2).Before(until) {
		until = next.Add(-p.hold(next) / 2)
	}
	return until
}

// minTTL is the least Job.TTL, the component's least ttl; minFitTTL the
// least default one, so that renewals every third of it keep up on a
// loaded host.
const (
	minTTL    = 10 * time.Millisecond
	minFitTTL = time.Second
)

// period is the time from planned to the next instant (maxHold*2 when
// there is none).
func (p plan) period(planned time.Time) time.Duration {
	if p.every > 0 {
		return p.every
	}
	next := p.next(planned)
	if next.IsZero() {
		return 2 * maxHold
	}
	return next.Sub(planned)
}

// ttl is the ttl of the exclusive run of j at planned: Job.TTL, else a
// quarter of the period, at least minFitTTL, at most maxHold (the
// component's default ttl). A quarter, so that a runner dying at the end
// of a run as long as three quarters of the period frees the lock before
// the next instant.
func (j *job) ttl(planned time.Time) time.Duration {
	if j.TTL > 0 {
		return j.TTL
	}
	return min(max(j.plan.period(planned)/4, minFitTTL), maxHold)
}

// plannedKey is the context key of the planned instant.
type plannedKey struct{}

// Planned returns the instant a job's run was planned for, from the ctx
// given to Job.Run.
func Planned(ctx context.Context) (time.Time, bool) {
	t, ok := ctx.Value(plannedKey{}).(time.Time)
	return t, ok
}

// NextRun returns the first instant after now at which j is planned, with
// cron expressions read in loc (unless CRON_TZ is given). Run is not
// needed; the other fields are validated as New does (a cron expression
// with no instant in the five years after now fails with ErrInvalidJob).
func NextRun(j Job, now time.Time, loc *time.Location) (time.Time, error) {
	if j.Name == "" {
		j.Name = "next"
	}
	if j.Run == nil {
		j.Run = func(context.Context) error { return nil }
	}
	p, err := j.plan(loc, now)
	if err != nil {
		return time.Time{}, err
	}
	return p.next(now), nil
}
