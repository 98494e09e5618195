package schedule

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
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
	// use Every.
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

	// Run is the work. Its ctx ends when the scheduler stops and, for an
	// exclusive job, when its lock is lost (cause wrapping
	// component.ErrLost); it carries the planned instant (Planned) and the
	// lock (component.LockFrom). A panic is recovered and logged. Required.
	Run func(ctx context.Context) error
}

// plan is a validated Job's timetable.
type plan struct {
	every time.Duration
	cron  cron.Schedule
}

var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

func (j Job) plan(loc *time.Location) (plan, error) {
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
	case j.Every != 0 && j.Every < time.Millisecond:
		return plan{}, bad("Every", "must be at least 1ms, got %v", j.Every)
	case j.Every != 0:
		return plan{every: j.Every}, nil
	case strings.HasPrefix(strings.TrimSpace(j.Cron), "@every"):
		return plan{}, bad("Cron", "@every is not aligned on the clock: use Every")
	}
	s, err := cronParser.Parse(j.Cron)
	if err != nil {
		return plan{}, bad("Cron", "%v", err)
	}
	if spec, ok := s.(*cron.SpecSchedule); ok && !strings.Contains(j.Cron, "TZ=") {
		spec.Location = loc
	}
	return plan{cron: s}, nil
}

// next returns the first planned instant strictly after t.
func (p plan) next(t time.Time) time.Time {
	if p.every > 0 {
		n := t.UnixNano()/int64(p.every) + 1
		return time.Unix(0, n*int64(p.every))
	}
	return p.cron.Next(t)
}

// hold is how long past planned an exclusive run keeps its lock: half the
// time to the next instant, 30 s at most.
func (p plan) hold(planned time.Time) time.Duration {
	period := p.every
	if period == 0 {
		period = p.next(planned).Sub(planned)
	}
	return min(period/2, 30*time.Second)
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
// needed; the other fields are validated as New does.
func NextRun(j Job, now time.Time, loc *time.Location) (time.Time, error) {
	if j.Name == "" {
		j.Name = "next"
	}
	if j.Run == nil {
		j.Run = func(context.Context) error { return nil }
	}
	p, err := j.plan(loc)
	if err != nil {
		return time.Time{}, err
	}
	return p.next(now), nil
}
