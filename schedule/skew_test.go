package schedule_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/memory"
	"github.com/mutexfx/mutexfx/internal/testutil"
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
			wantSkewWarning(t, skewWarnings(t, newMutex(t, clockedMemory{memory.New()}), tc.offset), tc.offset, tc.warn)
		})
	}
}

// skewWarnings runs an exclusive job every second on m with the clock
// offset from the host's, and returns the skew warnings logged by the end
// of its second run (the clocks are compared after the first instant,
// before the second starts).
func skewWarnings(t *testing.T, m *component.Mutex, offset time.Duration) []observer.LoggedEntry {
	t.Helper()
	log, obs := logs()
	r := newRuns()
	s, err := schedule.New(schedule.Options{Mutex: m, Logger: log, Clock: schedule.OffsetClock(offset)},
		schedule.Job{Name: "skew", Every: time.Second, Exclusive: true, Run: r.job("A")})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer stop(t, s)
	testutil.Poll(t, 10*time.Second, "two runs", func() bool { return len(r.snapshot()) >= 2 })
	return obs.FilterMessage(skewWarning).All()
}

// wantSkewWarning checks the warnings of skewWarnings: one naming a skew
// about offset and the 125 ms limit when warn, else none.
func wantSkewWarning(t *testing.T, got []observer.LoggedEntry, offset time.Duration, warn bool) {
	t.Helper()
	switch {
	case !warn && len(got) != 0:
		t.Fatalf("warned of skew %v: %v", offset, got[0].ContextMap())
	case warn && len(got) != 1:
		t.Fatalf("%d skew warnings, want 1", len(got))
	case warn:
		f := got[0].ContextMap()
		skew, _ := f["skew"].(time.Duration)
		if f["limit"] != 125*time.Millisecond || (skew-offset).Abs() > 50*time.Millisecond {
			t.Fatalf("warning %v, want skew about %v and limit 125ms", f, offset)
		}
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
