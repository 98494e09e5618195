package schedule

import (
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/mutexfx/mutexfx"
)

// JobsGroup is the fx value group of the jobs Module runs; Provide adds to
// it.
const JobsGroup = "mutexfx.schedule.jobs"

// Module provides a *Scheduler running every Job of the group JobsGroup
// (see Provide), started on the application's start (the hook returns at
// once) and stopped on its stop (the hook cancels the running jobs' ctx and
// waits for them within the stop deadline, and for the holds of the
// exclusive runs: see Scheduler.Stop). Exclusive jobs lock in the
// unnamed *mutexfx.Mutex, or the store Job.Store of the *mutexfx.Registry:
// use it with mutexfx.Module. A Clock, a *zap.Logger and a
// metric.MeterProvider in the graph are used when present.
var Module = fx.Module("mutexfx.schedule",
	fx.Provide(newFx),
	fx.Invoke(func(*Scheduler) {}),
)

// Provide adds jobs to the group run by Module.
func Provide(jobs ...Job) fx.Option {
	opts := make([]fx.Option, len(jobs))
	for i, j := range jobs {
		opts[i] = fx.Supply(fx.Annotated{Group: JobsGroup, Target: j})
	}
	return fx.Options(opts...)
}

// ProvideJob adds to the group run by Module the jobs built by
// constructors: functions whose parameters are taken from the fx graph
// and which return a Job, or a Job and an error. A job's dependencies are
// so injected:
//
//	schedule.ProvideJob(func(db *sql.DB) schedule.Job {
//		return schedule.Job{Name: "purge", Cron: "0 3 * * *", Exclusive: true,
//			Run: func(ctx context.Context) error { return purge(ctx, db) }}
//	})
func ProvideJob(constructors ...any) fx.Option {
	opts := make([]fx.Option, len(constructors))
	for i, c := range constructors {
		opts[i] = fx.Provide(fx.Annotate(c, fx.ResultTags(`group:"`+JobsGroup+`"`)))
	}
	return fx.Options(opts...)
}

type fxParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Jobs      []Job                `group:"mutexfx.schedule.jobs"`
	Mutex     *mutexfx.Mutex       `optional:"true"`
	Registry  *mutexfx.Registry    `optional:"true"`
	Clock     Clock                `optional:"true"`
	Logger    *zap.Logger          `optional:"true"`
	Meters    metric.MeterProvider `optional:"true"`
}

func newFx(p fxParams) (*Scheduler, error) {
	opts := Options{Mutex: p.Mutex, Clock: p.Clock, Logger: p.Logger, MeterProvider: p.Meters}
	if p.Registry != nil {
		opts.Resolver = p.Registry
	}
	s, err := New(opts, p.Jobs...)
	if err != nil {
		return nil, err
	}
	p.Lifecycle.Append(fx.Hook{OnStart: s.Start, OnStop: s.Stop})
	return s, nil
}
