package schedule_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers/memory"
	"github.com/mutexfx/mutexfx/internal/testutil"
	"github.com/mutexfx/mutexfx/schedule"
)

// TestStopKeepsTheHold: an instance stopped right after its exclusive run
// keeps the lock until the hold ends (planned + half the period), so that
// an instance whose clock is late (here by 150 ms) finds it held and skips
// the instant instead of running it a second time. Stop takes the hold.
func TestStopKeepsTheHold(t *testing.T) {
	t.Parallel()
	const every, hold, late = time.Second, 500 * time.Millisecond, 150 * time.Millisecond
	drv := memory.New()
	r := newRuns()
	ran := make(chan time.Time, 1)
	a, err := schedule.New(schedule.Options{Mutex: newMutex(t, drv), Clock: schedule.OffsetClock(0)},
		schedule.Job{Name: "hold", Every: every, Exclusive: true, Run: func(ctx context.Context) error {
			_ = r.job("A")(ctx)
			p, _ := schedule.Planned(ctx)
			select {
			case ran <- p:
			default:
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	logB, obsB := logs()
	b, err := schedule.New(schedule.Options{Logger: logB, Mutex: newMutex(t, drv), Clock: schedule.OffsetClock(-late)},
		schedule.Job{Name: "hold", Every: every, Exclusive: true, Run: r.job("B")})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*schedule.Scheduler{a, b} {
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	defer stop(t, b)

	var p time.Time
	select {
	case p = <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("A ran no instant")
	}
	stop(t, a) // right after A's run, before B (late) gets to the instant
	if now := time.Now(); now.Before(p.Add(hold)) {
		t.Errorf("A's Stop returned %v before the end of the hold", p.Add(hold).Sub(now))
	}
	skipped := func() bool {
		for _, e := range obsB.FilterMessage("exclusive job run by another instance, skipped").All() {
			if at, ok := e.ContextMap()["planned"].(time.Time); ok && at.Equal(p) {
				return true
			}
		}
		return false
	}
	testutil.Poll(t, 10*time.Second, "B to run or skip the instant", func() bool { return skipped() || len(r.snapshot()[p.UTC()]) > 1 })
	if who := r.snapshot()[p.UTC()]; !slices.Equal(who, []string{"A"}) {
		t.Fatalf("instant %s ran by %v, want [A]", p.Format("15:04:05.000"), who)
	}
}

// TestStopDeadlineEndsTheHold: a Stop whose ctx ends before the hold does
// not wait for it: the hold ends before the deadline and the lock is
// released.
func TestStopDeadlineEndsTheHold(t *testing.T) {
	t.Parallel()
	const hold = time.Second
	drv := memory.New()
	ran := make(chan struct{}, 1)
	s, err := schedule.New(schedule.Options{Mutex: newMutex(t, drv)},
		schedule.Job{Name: "cut", Every: 2 * hold, Exclusive: true, Run: func(context.Context) error {
			select {
			case ran <- struct{}{}:
			default:
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("no run")
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err = s.Stop(ctx)
	if took := time.Since(start); took >= hold/2 {
		t.Errorf("Stop took %v with a 300ms deadline", took)
	}
	if err != nil {
		// the hold ends 30 ms before the deadline: a loaded machine may
		// not release in that time, which Stop reports
		t.Logf("Stop: %v", err)
	}
	key := component.DefaultPrefix + schedule.LockPrefix + "cut"
	testutil.Poll(t, 10*time.Second, "the lock to be released", func() bool {
		_, held, err := drv.Inspect(context.Background(), key)
		return err == nil && !held
	})
	stop(t, s)
}

// TestSecondStopWaits: a second Stop waits for the runs as the first did,
// rather than returning nil while they still run.
func TestSecondStopWaits(t *testing.T) {
	s, release, returned := startStubborn(t)
	for i := range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		err := s.Stop(ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Stop #%d = %v while the job runs, want the deadline", i+1, err)
		}
	}
	close(release)
	stop(t, s)
	if !returned.Load() {
		t.Fatal("Stop returned nil before the job")
	}
	stop(t, s) // once stopped, every Stop returns nil
	if err := s.Start(context.Background()); !errors.Is(err, schedule.ErrState) {
		t.Errorf("Start after Stop = %v, want ErrState", err)
	}
}

// wokenClock is the wall clock whose SleepUntil returns nil when ctx ends,
// as a Clock whose timer and ctx fire together may. sleeping is closed at
// the first SleepUntil.
type wokenClock struct {
	once     sync.Once
	sleeping chan struct{}
}

func (*wokenClock) Now() time.Time { return time.Now() }

func (c *wokenClock) SleepUntil(ctx context.Context, _ time.Time) error {
	c.once.Do(func() { close(c.sleeping) })
	<-ctx.Done()
	return nil
}

// TestNoRunAfterStop: once Stop is called no run starts, even when the
// Clock wakes the scheduler up for an instant after its ctx ended.
func TestNoRunAfterStop(t *testing.T) {
	var runs atomic.Int32
	clock := &wokenClock{sleeping: make(chan struct{})}
	s, err := schedule.New(schedule.Options{Clock: clock}, schedule.Job{Name: "after", Every: time.Hour, Run: func(context.Context) error {
		runs.Add(1)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-clock.sleeping
	stop(t, s) // waits for a run it would have started
	if n := runs.Load(); n != 0 {
		t.Fatalf("%d runs started after Stop", n)
	}
}

func TestStopNeverStarted(t *testing.T) {
	s, err := schedule.New(schedule.Options{}, schedule.Job{Name: "idle", Every: time.Hour, Run: func(context.Context) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	stop(t, s)
	stop(t, s)
	if err := s.Start(context.Background()); !errors.Is(err, schedule.ErrState) {
		t.Errorf("Start after Stop = %v, want ErrState", err)
	}
}
