package schedule_test

import (
	"context"
	"go.uber.org/zap/zapcore"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/memory"
	"github.com/mutexfx/mutexfx/schedule"
)

// clockedMemory is the memory store with its clock readable: the memory
// store keeps this process's time (time.Now), which ServerTime returns.
type clockedMemory struct{ *memory.Driver }

var _ drivers.ServerClock = clockedMemory{}

func (clockedMemory) ServerTime(context.Context) (time.Time, error) { return time.Now(), nil }

const skewWarning = "clock skew with the lock store exceeds the job's safe limit: an instant may run twice"

// TestSkewWarning: an instance whose clock is 400 ms off the store's, with
// an exclusive job every second (hold 500 ms, safe limit 125 ms from the
// store), logs one warning naming the limit at its first instant; one
// 50 ms off logs none. Real time: the component's pooled waiters cannot
// cross testing/synctest bubbles.
func TestSkewWarning(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		offset time.Duration
		warn   bool
	}{
		{400 * time.Millisecond, true},
		{-400 * time.Millisecond, true},
		{50 * time.Millisecond, false},
	} {
		t.Run(tc.offset.String(), func(t *testing.T) {
			t.Parallel()
			log, obs := logs()
			r := newRuns()
			s, err := schedule.New(schedule.Options{Mutex: newMutex(t, clockedMemory{memory.New()}), Logger: log, Clock: schedule.OffsetClock(tc.offset)},
				schedule.Job{Name: "skew", Every: time.Second, Exclusive: true, Run: r.job("A")})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			defer stop(t, s)
			// The clocks are compared after the first instant, before
			// the second starts.
			waitFor(t, "two runs", func() bool { return len(r.snapshot()) >= 2 })
			got := obs.FilterMessage(skewWarning).All()
			switch {
			case !tc.warn && len(got) != 0:
				t.Fatalf("warned of skew %v: %v", tc.offset, got[0].ContextMap())
			case tc.warn && len(got) != 1:
				t.Fatalf("%d skew warnings, want 1", len(got))
			case tc.warn:
				f := got[0].ContextMap()
				skew, _ := f["skew"].(time.Duration)
				if f["limit"] != 125*time.Millisecond || (skew-tc.offset).Abs() > 50*time.Millisecond {
					t.Fatalf("warning %v, want skew about %v and limit 125ms", f, tc.offset)
				}
			}
		})
	}
}

// TestStopWarnsOnLongHold: a Stop waiting for an exclusive run's hold (2 s
// here: a 4 s period) logs it at warn level after a second.
func TestStopWarnsOnLongHold(t *testing.T) {
	t.Parallel()
	log, obs := logs()
	ran := make(chan struct{}, 1)
	s, err := schedule.New(schedule.Options{Mutex: newMutex(t, memory.New()), Logger: log},
		schedule.Job{Name: "hold", Every: 4 * time.Second, Exclusive: true, Run: func(context.Context) error {
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
	stop(t, s)
	got := obs.FilterMessage("stop waits for an exclusive job's hold, so that no instance with a late clock runs its instant again").All()
	if len(got) != 1 || got[0].ContextMap()["job"] != "hold" || got[0].Level != zapcore.WarnLevel {
		t.Fatalf("stop warnings %v, want one naming job hold", got)
	}
}
