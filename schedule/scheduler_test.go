package schedule_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers/memory"
	"github.com/mutexfx/mutexfx/internal/testutil"
	"github.com/mutexfx/mutexfx/schedule"
)

const period = 400 * time.Millisecond

// skews are the instances' clock offsets of the skewed scenarios: up to
// ±period/16, 50 ms between the extremes, within the 100 ms that an
// exclusive instant tolerates (half its hold, see tooLate).
var skews = []time.Duration{-period / 16, 0, period / 16}

func TestExclusiveThreeInstancesExactlyOnce(t *testing.T) {
	t.Parallel()
	for _, skewed := range []bool{false, true} {
		t.Run(fmt.Sprintf("skewed=%v", skewed), func(t *testing.T) {
			t.Parallel()
			drv := memory.New()
			r := newRuns()
			var scheds []*schedule.Scheduler
			for i := range 3 {
				clock := schedule.OffsetClock(0)
				if skewed {
					clock = schedule.OffsetClock(skews[i])
				}
				s, err := schedule.New(schedule.Options{Mutex: newMutex(t, drv), Clock: clock},
					schedule.Job{Name: "report", Every: period, Exclusive: true, Run: r.job(fmt.Sprint("instance", i))})
				if err != nil {
					t.Fatal(err)
				}
				scheds = append(scheds, s)
			}
			start := time.Now()
			for _, s := range scheds {
				if err := s.Start(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			await(t, 30*period, "twelve instants run", r.ran(12)) // the scenario's length
			end := time.Now()
			for _, s := range scheds {
				stop(t, s)
			}
			checkExactlyOnce(t, r.snapshot(), period, start.Add(period), end.Add(-period))
		})
	}
}

func TestNonExclusiveRunsInEveryInstance(t *testing.T) {
	r := newRuns()
	var scheds []*schedule.Scheduler
	for i := range 2 {
		s, err := schedule.New(schedule.Options{}, schedule.Job{Name: "local", Every: 50 * time.Millisecond, Run: r.job(fmt.Sprint(i))})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		scheds = append(scheds, s)
	}
	testutil.Poll(t, 10*time.Second, "an instant run by both instances", func() bool {
		for _, who := range r.snapshot() {
			if len(who) == 2 {
				return true
			}
		}
		return false
	})
	for _, s := range scheds {
		stop(t, s)
	}
}

// lateClock is the wall clock with every wake-up late by late: a process
// woken late (a loaded machine, a pause).
type lateClock struct{ late time.Duration }

func (c lateClock) Now() time.Time { return time.Now() }

func (c lateClock) SleepUntil(ctx context.Context, t time.Time) error {
	return schedule.SystemClock.SleepUntil(ctx, t.Add(c.late))
}

// TestExclusiveTooLate: an exclusive instant attempted later than half its
// hold after it is skipped (another instance, its clock ahead, may have run
// and released it), and logged; an attempt within that half runs.
func TestExclusiveTooLate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		late time.Duration
		runs bool
	}{
		{period / 16, true},     // 25 ms, half the hold is 100 ms
		{period * 3 / 8, false}, // 150 ms: inside the hold, past its half
	} {
		t.Run(tc.late.String(), func(t *testing.T) {
			t.Parallel()
			log, obs := logs()
			r := newRuns()
			s, err := schedule.New(schedule.Options{Logger: log, Mutex: newMutex(t, memory.New()), Clock: lateClock{tc.late}},
				schedule.Job{Name: "late", Every: period, Exclusive: true, Run: r.job("a")})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			if tc.runs {
				testutil.Poll(t, 10*time.Second, "two runs", func() bool { return len(r.snapshot()) >= 2 })
			} else {
				testutil.Poll(t, 10*time.Second, "two skipped instants", func() bool { return obs.FilterMessageSnippet("too late").Len() >= 2 })
			}
			stop(t, s)
			if got := len(r.snapshot()) > 0; got != tc.runs {
				t.Fatalf("ran: %v, want %v", got, tc.runs)
			}
		})
	}
}

func TestRunsNeverStack(t *testing.T) {
	log, obs := logs()
	var inflight, most, count atomic.Int32
	s, err := schedule.New(schedule.Options{Logger: log}, schedule.Job{Name: "slow", Every: 20 * time.Millisecond, Run: func(ctx context.Context) error {
		n := inflight.Add(1)
		defer inflight.Add(-1)
		for old := most.Load(); n > old && !most.CompareAndSwap(old, n); old = most.Load() {
		}
		count.Add(1)
		select { // the work: longer than three periods
		case <-time.After(70 * time.Millisecond):
		case <-ctx.Done():
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testutil.Poll(t, 10*time.Second, "three runs", func() bool { return count.Load() >= 3 })
	stop(t, s)
	if most.Load() != 1 {
		t.Fatalf("%d runs at once", most.Load())
	}
	if obs.FilterMessageSnippet("still running").Len() == 0 {
		t.Fatal("skipped instants not logged")
	}
}

func TestPanicAndErrorLogged(t *testing.T) {
	log, obs := logs()
	var n atomic.Int32
	s, err := schedule.New(schedule.Options{Logger: log}, schedule.Job{Name: "bad", Every: 10 * time.Millisecond, Run: func(context.Context) error {
		if n.Add(1)%2 == 1 {
			panic("boom")
		}
		return errors.New("failed")
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testutil.Poll(t, 10*time.Second, "runs after a panic", func() bool { return n.Load() >= 4 })
	stop(t, s)
	if obs.FilterMessage("scheduled job panicked").Len() == 0 || obs.FilterMessage("scheduled job failed").Len() == 0 {
		t.Fatalf("logs: %v", obs.All())
	}
}

type stores map[string]*component.Mutex

func (s stores) Get(name string) (*component.Mutex, error) {
	if m, ok := s[name]; ok {
		return m, nil
	}
	return nil, fmt.Errorf("store %q not configured", name)
}

func TestExclusiveStoreSelection(t *testing.T) {
	locks := newMutex(t, memory.New())
	tests := []struct {
		name     string
		opts     schedule.Options
		store    string
		runs     bool
		logged   string
		lockedIn *component.Mutex
	}{
		{"named store", schedule.Options{Resolver: stores{"locks": locks}}, "locks", true, "", locks},
		{"missing store", schedule.Options{Resolver: stores{"locks": locks}}, "nope", false, `store "nope" not configured`, nil},
		{"no resolver", schedule.Options{}, "locks", false, "no Options.Resolver", nil},
		{"no store at all", schedule.Options{}, "", false, "set Options.Mutex", nil},
		{"resolver without default", schedule.Options{Resolver: stores{"locks": locks}}, "", false, "set Options.Mutex", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log, obs := logs()
			tt.opts.Logger = log
			var ran atomic.Int32
			var held atomic.Bool
			s, err := schedule.New(tt.opts, schedule.Job{Name: "sel-" + tt.name, Store: tt.store, Every: 20 * time.Millisecond, Exclusive: true,
				Run: func(ctx context.Context) error {
					if l := component.LockFrom(ctx); l != nil && tt.lockedIn != nil && len(tt.lockedIn.Held()) == 1 && l.Name() == "schedule:sel-"+tt.name {
						held.Store(true)
					}
					ran.Add(1)
					return nil
				}})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			if tt.runs {
				testutil.Poll(t, 10*time.Second, "a run", func() bool { return ran.Load() > 0 })
			} else {
				testutil.Poll(t, 10*time.Second, "the error logged", func() bool { return obs.FilterMessage("exclusive job not run: its lock store is missing").Len() > 0 })
			}
			stop(t, s)
			if tt.runs != (ran.Load() > 0) || held.Load() != tt.runs {
				t.Errorf("ran %d times, lock held in the store %v", ran.Load(), held.Load())
			}
			if tt.logged != "" {
				e := obs.FilterMessage("exclusive job not run: its lock store is missing").All()[0]
				if err, _ := e.ContextMap()["error"].(string); !strings.Contains(err, tt.logged) {
					t.Errorf("logged %q, want %q in it", err, tt.logged)
				}
			}
		})
	}
}

func TestStopCancelsAndWaitsForRunningJob(t *testing.T) {
	// Not in a synctest bubble: the component's waiters are pooled, and a
	// bubble's channels must not leave it.
	m := newMutex(t, memory.New())
	started, cancelled, cleanup := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var returned atomic.Bool
	log, obs := logs()
	s, err := schedule.New(schedule.Options{Mutex: m, Logger: log}, schedule.Job{Name: "long", Every: 10 * time.Millisecond, Exclusive: true, Run: func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		close(cancelled)
		<-cleanup // cleaning up after the cancel
		returned.Store(true)
		return ctx.Err()
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); !errors.Is(err, schedule.ErrState) {
		t.Errorf("second Start: %v", err)
	}
	<-started
	stopped := make(chan error, 1)
	go func() { stopped <- s.Stop(context.Background()) }()
	<-cancelled
	notBefore(t, stopped, "Stop returned while the job was cleaning up")
	close(cleanup)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if !returned.Load() {
		t.Fatal("Stop returned before the running job")
	}
	if n := len(m.Held()); n != 0 {
		t.Fatalf("%d locks still held after Stop", n)
	}
	checkInterrupted(t, obs, schedule.ErrStopped)
}

// notBefore fails the test when ch delivers within 100 ms: a call that
// must wait for something the test still holds back has not returned.
func notBefore(t *testing.T, ch <-chan error, msg string) {
	t.Helper()
	bound := time.NewTimer(100 * time.Millisecond)
	defer bound.Stop()
	select {
	case err := <-ch:
		t.Fatalf("%s (%v)", msg, err)
	case <-bound.C:
	}
}

// checkInterrupted fails unless obs holds a warning of an interrupted run
// whose cause is cause.
func checkInterrupted(t *testing.T, obs *observer.ObservedLogs, cause error) {
	t.Helper()
	got := obs.FilterMessage("scheduled job interrupted").All()
	if len(got) != 1 || got[0].Level != zapcore.WarnLevel || !strings.Contains(fmt.Sprint(got[0].ContextMap()["cause"]), cause.Error()) {
		t.Fatalf("interrupted runs logged %v, want one warning with cause %v", got, cause)
	}
}

// startStubborn starts a scheduler whose one job ignores its ctx: it
// returns (and sets returned) only once release is closed. It returns when
// the job's first run has started.
func startStubborn(t *testing.T) (s *schedule.Scheduler, release chan struct{}, returned *atomic.Bool) {
	t.Helper()
	release = make(chan struct{})
	returned = new(atomic.Bool)
	started := make(chan struct{})
	s, err := schedule.New(schedule.Options{}, schedule.Job{Name: "stubborn", Every: 10 * time.Millisecond, Run: func(ctx context.Context) error {
		close(started)
		<-release // ignores ctx
		returned.Store(true)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-started
	return s, release, returned
}

func TestStopDeadline(t *testing.T) {
	s, release, _ := startStubborn(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if err := s.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Stop = %v, want the deadline", err)
	}
	close(release)
	stop(t, s) // waits for the job now that it returns
}

func TestLostLockCancelsJob(t *testing.T) {
	drv := memory.New()
	m := newMutex(t, drv)
	cause := make(chan error, 1)
	entered := make(chan struct{})
	log, obs := logs()
	// The first instant is up to half an hour away: run with a clock just
	// before the next one.
	clock := schedule.OffsetClock(time.Until(time.Now().Truncate(time.Hour / 2).Add(time.Hour/2 - 20*time.Millisecond)))
	s, err := schedule.New(schedule.Options{Mutex: m, Clock: clock, Logger: log}, schedule.Job{Name: "lose", Key: "lose-key", Every: time.Hour / 2, Exclusive: true, Run: func(ctx context.Context) error {
		close(entered)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-entered
	if !drv.Revoke(component.DefaultPrefix + "schedule:lose-key") {
		t.Fatal("lock schedule:lose-key not in the store")
	}
	if err := <-cause; !errors.Is(err, component.ErrLost) {
		t.Fatalf("cause = %v, want ErrLost", err)
	}
	stop(t, s)
	checkInterrupted(t, obs, component.ErrLost)
}
