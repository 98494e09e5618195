package schedule

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/mutexfx/mutexfx/component"
)

// ScopeName is the instrumentation scope of the Scheduler's meter.
const ScopeName = "github.com/mutexfx/mutexfx/schedule"

// MetricInstants counts the planned instants of each job by outcome, at
// each instance (see docs/telemetry.md). Its attributes are AttrJob and
// component.AttrOutcome.
const MetricInstants = "mutexfx.schedule.instants"

// AttrJob is the job's Name on MetricInstants. Job names are declared by
// the application, so bounded.
const AttrJob = attribute.Key("mutexfx.job")

// Outcomes of an instant (MetricInstants). Each instant planned at an
// instance counts once, with one of the first seven; the last three count
// what an instance learns later about an instant another instance held.
const (
	// OutcomeRan: the job ran here and returned nil.
	OutcomeRan = "ran"
	// OutcomeFailed: the job ran here and returned an error or panicked.
	OutcomeFailed = "failed"
	// OutcomeInterrupted: the job's ctx ended before it returned (the
	// scheduler stopping, the lock lost).
	OutcomeInterrupted = "interrupted"
	// OutcomeSkippedHeldElsewhere: an exclusive job's lock was held by
	// another instance.
	OutcomeSkippedHeldElsewhere = "skipped_held_elsewhere"
	// OutcomeSkippedRunning: the job's previous run was still going here.
	OutcomeSkippedRunning = "skipped_running"
	// OutcomeMissed: the scheduler woke up, or an exclusive job's store
	// answered, too late for the instant.
	OutcomeMissed = "missed"
	// OutcomeStoreError: an exclusive job's lock store was missing or
	// failed to answer.
	OutcomeStoreError = "store_error"
	// OutcomeInterruptedElsewhere: the holding of an instant skipped here
	// ended without its holder releasing it (see Job.RerunInterrupted).
	OutcomeInterruptedElsewhere = "interrupted_elsewhere"
	// OutcomeRerun: an instant interrupted elsewhere is run again here;
	// that run counts too, as ran, failed or interrupted.
	OutcomeRerun = "rerun"
	// OutcomeRerunSkipped: an instant interrupted elsewhere is not run
	// again here because the job is running here, or too late to be sure
	// that no other instance ran it again (see Job.RerunInterrupted).
	OutcomeRerunSkipped = "rerun_skipped"
)

// newInstants returns the MetricInstants counter of mp's meter, or of
// otel.GetMeterProvider() when mp is nil.
func newInstants(mp metric.MeterProvider) metric.Int64Counter {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	c, err := mp.Meter(ScopeName).Int64Counter(MetricInstants, metric.WithUnit("{instant}"),
		metric.WithDescription("Planned instants of scheduled jobs, by job and outcome."))
	if err != nil {
		otel.Handle(err) // c is a working no-op
	}
	return c
}

// count adds an instant of j with outcome to MetricInstants.
func (s *Scheduler) count(j *job, outcome string) {
	s.instants.Add(context.Background(), 1, metric.WithAttributes(AttrJob.String(j.Name), component.AttrOutcome.String(outcome)))
}

// lost logs an instant of j missed or interrupted, at warn level, and
// counts it with outcome: every such warning goes through here.
func (s *Scheduler) lost(log *zap.Logger, j *job, outcome, msg string, fields ...zap.Field) {
	log.Warn(msg, fields...)
	s.count(j, outcome)
}
