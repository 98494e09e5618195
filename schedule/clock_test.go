package schedule_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/internal/testutil"
	"github.com/mutexfx/mutexfx/schedule"
)

func TestOffsetClockSleepUntil(t *testing.T) {
	stopped := errors.New("stopped")
	ended, cancel := context.WithCancelCause(context.Background())
	cancel(stopped)
	now := time.Now()
	tests := []struct {
		name  string
		ctx   context.Context
		until time.Time
		want  error
	}{
		{"past instant", context.Background(), now.Add(-time.Hour), nil},
		{"zero instant", context.Background(), time.Time{}, nil},
		{"near instant", context.Background(), now.Add(10 * time.Millisecond), nil},
		{"past instant, ctx ended", ended, now.Add(-time.Hour), stopped},
		{"zero instant, ctx ended", ended, time.Time{}, stopped},
		{"future instant, ctx ended", ended, now.Add(time.Hour), stopped},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := schedule.SystemClock.SleepUntil(tt.ctx, tt.until)
			if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
				t.Fatalf("SleepUntil = %v, want %v", err, tt.want)
			}
			if tt.want == nil && time.Now().Before(tt.until) {
				t.Fatalf("returned before %v", tt.until)
			}
		})
	}
}

// jumpClock reads before at its first reading (New validating the jobs),
// after from then on: a clock stepped years ahead. Its SleepUntil returns
// nil at once for a past instant without looking at ctx, as a Clock may.
type jumpClock struct {
	before, after time.Time
	reads         atomic.Int32
}

func (c *jumpClock) Now() time.Time {
	if c.reads.Add(1) == 1 {
		return c.before
	}
	return c.after
}

func (c *jumpClock) SleepUntil(ctx context.Context, t time.Time) error {
	if !t.After(c.after) {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

// TestNoNextInstantStopsJob: a cron job whose expression has no instant
// left after the clock's time (29 February, from March 2097: 2100 is no
// leap year, and the cron search stops after five years) logs it and stops
// planning, instead of spinning on the zero time; Stop returns.
func TestNoNextInstantStopsJob(t *testing.T) {
	log, obs := logs()
	clock := &jumpClock{before: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), after: time.Date(2097, 3, 1, 0, 0, 0, 0, time.UTC)}
	s, err := schedule.New(schedule.Options{Logger: log, Clock: clock, Location: time.UTC},
		schedule.Job{Name: "leap", Cron: "0 0 29 2 *", Run: func(context.Context) error {
			t.Error("ran")
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testutil.Poll(t, 10*time.Second, "the job to stop planning", func() bool { return obs.FilterMessageSnippet("no next instant").Len() > 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if n := obs.FilterMessageSnippet("missed").Len(); n > 0 {
		t.Fatalf("%d instants logged as missed", n)
	}
}
