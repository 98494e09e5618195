package schedule_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/v2"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/mutexfx/mutexfx"
	"github.com/mutexfx/mutexfx/schedule"
)

// fxConfig configures two memory stores (process-wide, shared by the apps
// of the test): "locks", the default, and "other".
func fxConfig(t *testing.T) *koanf.Koanf {
	t.Helper()
	k := koanf.New(".")
	err := k.Load(confmap.Provider(map[string]any{
		"mutex.locks.prefix":  "schedfx:",
		"mutex.locks.default": true,
		"mutex.other.prefix":  "schedfx-other:",
	}, "."), nil)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestFxThreeAppsExactlyOnce(t *testing.T) {
	t.Parallel()
	for _, skewed := range []bool{false, true} {
		t.Run(fmt.Sprintf("skewed=%v", skewed), func(t *testing.T) {
			t.Parallel()
			r := newRuns()
			var apps []*fxtest.App
			for i := range 3 {
				clock := schedule.OffsetClock(0)
				if skewed {
					clock = schedule.OffsetClock(skews[i])
				}
				apps = append(apps, fxtest.New(t,
					fx.NopLogger,
					mutexfx.Module(fxConfig(t)),
					schedule.Module,
					fx.Supply(fx.Annotate(clock, fx.As(new(schedule.Clock)))),
					schedule.Provide(
						schedule.Job{Name: "fx-report", Key: fmt.Sprintf("fx-report-%v", skewed), Every: period, Exclusive: true, Run: r.job(fmt.Sprint("app", i))},
						schedule.Job{Name: "fx-other", Key: fmt.Sprintf("fx-other-%v", skewed), Store: "other", Every: time.Hour, Exclusive: true, Run: r.job("never")},
					),
				))
			}
			start := time.Now()
			for _, app := range apps {
				app.RequireStart()
			}
			if took := time.Since(start); took > period/2 {
				t.Errorf("starting three apps took %v: OnStart must return at once", took)
			}
			await(t, 30*period, "twelve instants run", r.ran(12)) // the scenario's length
			end := time.Now()
			for _, app := range apps {
				app.RequireStop()
			}
			by := r.snapshot()
			checkExactlyOnce(t, by, period, start.Add(period), end.Add(-period))
		})
	}
}

func TestFxModuleErrors(t *testing.T) {
	run := func(context.Context) error { return nil }
	err := fx.ValidateApp(fx.NopLogger, mutexfx.Module(fxConfig(t)), schedule.Module,
		schedule.Provide(schedule.Job{Name: "ok", Every: time.Second, Exclusive: true, Run: run}))
	if err != nil {
		t.Fatalf("ValidateApp: %v", err)
	}
	app := fx.New(fx.NopLogger, mutexfx.Module(fxConfig(t)), schedule.Module,
		schedule.Provide(schedule.Job{Name: "bad", Cron: "nope", Run: run}))
	if err := app.Err(); !errors.Is(err, schedule.ErrInvalidJob) {
		t.Fatalf("fx.New with an invalid job: %v", err)
	}
}

func TestFxStopWaitsForJob(t *testing.T) {
	started, cancelled, cleanup := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var returned atomic.Bool
	app := fxtest.New(t, fx.NopLogger, mutexfx.Module(fxConfig(t)), schedule.Module,
		schedule.Provide(schedule.Job{Name: "fx-long", Every: 10 * time.Millisecond, Exclusive: true, Run: func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			close(cancelled)
			<-cleanup // the job's cleanup, which stop must wait for
			returned.Store(true)
			return nil
		}}))
	app.RequireStart()
	<-started
	stopped := make(chan error, 1)
	go func() { stopped <- app.Stop(context.Background()) }()
	<-cancelled
	notBefore(t, stopped, "the app stopped while its job was cleaning up")
	close(cleanup)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if !returned.Load() {
		t.Fatal("the app stopped before its running job returned")
	}
}

// greeter is a dependency injected into a job.
type greeter struct{ ran chan string }

// TestFxProvideJobInjects: ProvideJob builds a job from the graph (its
// constructor takes *greeter), which runs with it; a constructor's error
// fails the app.
func TestFxProvideJobInjects(t *testing.T) {
	t.Parallel()
	g := &greeter{ran: make(chan string, 1)}
	app := fxtest.New(t, fx.NopLogger, mutexfx.Module(fxConfig(t)), schedule.Module,
		fx.Supply(g),
		schedule.ProvideJob(func(g *greeter) schedule.Job {
			return schedule.Job{Name: "fx-injected", Every: 10 * time.Millisecond, Run: func(context.Context) error {
				select {
				case g.ran <- "fx-injected":
				default:
				}
				return nil
			}}
		}))
	app.RequireStart()
	defer app.RequireStop()
	select {
	case name := <-g.ran:
		if name != "fx-injected" {
			t.Fatalf("ran %q", name)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the injected job did not run")
	}

	boom := errors.New("boom")
	bad := fx.New(fx.NopLogger, mutexfx.Module(fxConfig(t)), schedule.Module,
		schedule.ProvideJob(func() (schedule.Job, error) { return schedule.Job{}, boom }))
	if err := bad.Err(); !errors.Is(err, boom) {
		t.Fatalf("fx.New with a failing job constructor: %v", err)
	}
}
