package schedule_test

import (
	"context"
	"errors"
	"maps"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/mutexfx/mutexfx"
	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers/memory"
	"github.com/mutexfx/mutexfx/internal/testutil"
	"github.com/mutexfx/mutexfx/schedule"
)

// manualClock is a Clock the test sets: its sleepers wake when it reads
// their time, so each instant comes when the test says.
type manualClock struct {
	mu       sync.Mutex
	now      time.Time
	changed  chan struct{}
	sleepers int // SleepUntil calls waiting
}

func newManualClock(now time.Time) *manualClock {
	return &manualClock{now: now, changed: make(chan struct{})}
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) SleepUntil(ctx context.Context, t time.Time) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		c.mu.Lock()
		now, changed := c.now, c.changed
		if !now.Before(t) {
			c.mu.Unlock()
			return nil
		}
		c.sleepers++
		c.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-changed:
		}
		c.mu.Lock()
		c.sleepers--
		c.mu.Unlock()
	}
}

// waitSleepers waits until n SleepUntil calls wait for a time to come: the
// schedulers' loops have planned their instants from the current time.
func (c *manualClock) waitSleepers(t *testing.T, n int) {
	t.Helper()
	testutil.Poll(t, 10*time.Second, "the jobs to plan their instants", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.sleepers >= n
	})
}

// set sets the clock to now, waking the sleepers it reaches.
func (c *manualClock) set(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = now
	close(c.changed)
	c.changed = make(chan struct{})
}

// outcome is a point of MetricInstants: a job and an outcome.
type outcome struct{ job, outcome string }

// instants returns the values of MetricInstants read by r.
func instants(t *testing.T, r *sdkmetric.ManualReader) map[outcome]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[outcome]int64{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != schedule.ScopeName {
			continue
		}
		for _, m := range sm.Metrics {
			if m.Name != schedule.MetricInstants {
				t.Errorf("unexpected instrument %q", m.Name)
				continue
			}
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok || !sum.IsMonotonic {
				t.Fatalf("%s: %T, want a monotonic int64 sum", m.Name, m.Data)
			}
			for _, p := range sum.DataPoints {
				job, _ := p.Attributes.Value(schedule.AttrJob)
				oc, _ := p.Attributes.Value(component.AttrOutcome)
				if p.Attributes.Len() != 2 {
					t.Errorf("attributes %v, want job and outcome only", p.Attributes.ToSlice())
				}
				out[outcome{job.AsString(), oc.AsString()}] = p.Value
			}
		}
	}
	return out
}

// TestInstantsMetric: instance A runs three exclusive jobs at the same
// instant: "ok" runs, "held" is skipped because instance B (whose clock
// reached the instant first) is running it, and "cut" is interrupted by
// the loss of its lock. A's MetricInstants counts one instant of each job
// with that outcome, and nothing else; B's counts its run of "held".
func TestInstantsMetric(t *testing.T) {
	t.Parallel()
	drv := memory.New()
	start := time.Date(2030, 1, 1, 0, 0, 30, 0, time.UTC)
	instant := start.Add(30 * time.Second)
	readerA, readerB := sdkmetric.NewManualReader(), sdkmetric.NewManualReader()
	clockA, clockB := newManualClock(start), newManualClock(start)

	releaseB, startedB := make(chan struct{}), make(chan struct{})
	b, err := schedule.New(schedule.Options{Mutex: newMutex(t, drv), Clock: clockB,
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(readerB))},
		schedule.Job{Name: "held", Every: time.Minute, Exclusive: true, Run: func(context.Context) error {
			close(startedB)
			<-releaseB
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	startedCut := make(chan struct{})
	nop := func(context.Context) error { return nil }
	log, obs := logs()
	a, err := schedule.New(schedule.Options{Mutex: newMutex(t, drv), Clock: clockA, Logger: log,
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(readerA))},
		schedule.Job{Name: "ok", Every: time.Minute, Exclusive: true, Run: nop},
		schedule.Job{Name: "held", Every: time.Minute, Exclusive: true, Run: nop},
		schedule.Job{Name: "cut", Every: time.Minute, Exclusive: true, Run: func(ctx context.Context) error {
			close(startedCut)
			<-ctx.Done()
			return ctx.Err()
		}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*schedule.Scheduler{a, b} {
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
	}

	clockB.waitSleepers(t, 1)
	clockB.set(instant)
	<-startedB
	clockA.waitSleepers(t, 3)
	clockA.set(instant)
	<-startedCut
	if !drv.Revoke(component.DefaultPrefix + "schedule:cut") {
		t.Fatal("lock schedule:cut not in the store")
	}
	want := map[outcome]int64{
		{"ok", schedule.OutcomeRan}:                    1,
		{"held", schedule.OutcomeSkippedHeldElsewhere}: 1,
		{"cut", schedule.OutcomeInterrupted}:           1,
	}
	testutil.Poll(t, 10*time.Second, "A to count its three instants", func() bool { return len(instants(t, readerA)) >= len(want) })
	close(releaseB)
	// B counts its run when the run has returned: wait for it, or the stop
	// below could end the run's ctx first and make it an interrupted one
	testutil.Poll(t, 10*time.Second, "B to count its instant", func() bool { return len(instants(t, readerB)) >= 1 })
	// The holds end half a period past the instant.
	clockA.set(instant.Add(30 * time.Second))
	clockB.set(instant.Add(30 * time.Second))
	stop(t, a)
	stop(t, b)

	if got := instants(t, readerA); !maps.Equal(got, want) {
		t.Errorf("A counted %v, want %v", got, want)
	}
	if got, want := instants(t, readerB), map[outcome]int64{{"held", schedule.OutcomeRan}: 1}; !maps.Equal(got, want) {
		t.Errorf("B counted %v, want %v", got, want)
	}
	checkInterrupted(t, obs, component.ErrLost)
}

// TestFxMeterProvider: Module records MetricInstants with the
// metric.MeterProvider of the fx graph.
func TestFxMeterProvider(t *testing.T) {
	t.Parallel()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	app := fxtest.New(t, fx.NopLogger, mutexfx.Module(fxConfig(t)), schedule.Module,
		fx.Supply(fx.Annotate(mp, fx.As(new(metric.MeterProvider)))),
		schedule.Provide(schedule.Job{Name: "fx-metered", Every: 10 * time.Millisecond, Run: func(context.Context) error {
			return errors.New("fails")
		}}))
	app.RequireStart()
	defer app.RequireStop()
	testutil.Poll(t, 10*time.Second, "a failed run counted", func() bool {
		return instants(t, reader)[outcome{"fx-metered", schedule.OutcomeFailed}] > 0
	})
}
