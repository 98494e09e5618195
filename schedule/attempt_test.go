package schedule_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap/zaptest/observer"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/memory"
	"github.com/mutexfx/mutexfx/internal/bubble"
	"github.com/mutexfx/mutexfx/schedule"
)

// slowAcquire is the memory store whose Acquire reaches it delay after it
// is sent, as a loaded network store's does: the lock is granted then.
type slowAcquire struct {
	*memory.Driver
	delay time.Duration
}

func (d slowAcquire) Acquire(ctx context.Context, req drivers.AcquireRequest) (drivers.AcquireResult, error) {
	time.Sleep(d.delay)
	return d.Driver.Acquire(ctx, req)
}

// slowAndPrompt returns the schedulers of job("B"), whose attempts reach
// drv delay late (with its Mutex and its logs), and, unless prompt is "",
// of job(prompt) on drv itself: B first. They are stopped at the test's
// end too, a failure's included.
func slowAndPrompt(t *testing.T, drv *memory.Driver, delay time.Duration, job func(who string) schedule.Job, prompt string) (
	[]*schedule.Scheduler, *component.Mutex, *observer.ObservedLogs,
) {
	t.Helper()
	logB, obsB := logs()
	mB := newMutex(t, slowAcquire{drv, delay})
	b, err := schedule.New(schedule.Options{Logger: logB, Mutex: mB}, job("B"))
	if err != nil {
		t.Fatal(err)
	}
	scheds := []*schedule.Scheduler{b}
	if prompt != "" {
		other, err := schedule.New(schedule.Options{Mutex: newMutex(t, drv)}, job(prompt))
		if err != nil {
			t.Fatal(err)
		}
		scheds = append(scheds, other)
	}
	for _, s := range scheds {
		t.Cleanup(func() { stop(t, s) })
	}
	return scheds, mB, obsB
}

// TestExclusiveAttemptAnsweredLate: an exclusive job every 400 ms (hold
// 200 ms, half of it 100 ms), clocks in sync. Instance B's attempts are
// sent at the instant, so B is on time before them, and reach the store
// delay later. At 300 ms, A (prompt) has run the instant and released
// the lock at the end of its hold: B gets the lock but, answered past
// half the hold, releases it and skips the instant as too late instead of
// running it a second time. Alone, B runs the instants it gets answered
// within half the hold, and skips those answered later (it cannot know
// that no other instance ran them).
func TestExclusiveAttemptAnsweredLate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prompt string        // instance A ("" for none), whose attempts reach the store at once, runs too
		delay  time.Duration // of B's attempts
		want   string        // the instance running each instant, "" for none
	}{
		{"after another ran it", "A", 300 * time.Millisecond, "A"},
		{"alone, within half the hold", "", 50 * time.Millisecond, "B"},
		{"alone, past half the hold", "", 300 * time.Millisecond, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bubble.Unpool(t)
			synctest.Test(t, func(t *testing.T) {
				const every, hold, instants = 400 * time.Millisecond, 200 * time.Millisecond, 4
				drv := memory.New()
				r := newRuns()
				job := func(who string) schedule.Job {
					return schedule.Job{Name: "report", Every: every, Exclusive: true, Run: r.job(who)}
				}
				scheds, mB, obsB := slowAndPrompt(t, drv, tc.delay, job, tc.prompt)
				key := mB.Prefix() + schedule.LockPrefix + "report"
				// Each instant ends with the release of the job's lock by
				// the instance that ran it, at the end of the hold, and
				// with A, by B of the lock it got too late.
				perInstant := 1
				if tc.prompt != "" {
					perInstant = 2
				}
				ended := releases(t, drv, key).reached(instants * perInstant)
				first := time.Now().Truncate(every).Add(every)
				for _, s := range scheds {
					if err := s.Start(context.Background()); err != nil {
						t.Fatal(err)
					}
				}
				// The last instant's hold and B's answer for it end the
				// scenario.
				last := first.Add((instants - 1) * every)
				await(t, time.Until(last.Add(max(hold, tc.delay)+time.Millisecond)), "the last instant's releases", ended)
				synctest.Wait()
				if at := time.Since(last); at != max(hold, tc.delay) {
					t.Errorf("the last instant's last release %v past it, want %v (the hold's end or B's answer)", at, max(hold, tc.delay))
				}
				// A lock got too late is released at once, not left to expire.
				if _, held, err := drv.Inspect(context.Background(), key); err != nil || held {
					t.Errorf("the job's lock is held (%v) past the last instant's hold and attempt", err)
				}
				for _, s := range scheds {
					stop(t, s)
				}

				by := r.snapshot()
				var skips int
				for _, e := range obsB.FilterMessageSnippet("too late").All() {
					if got := e.ContextMap()["attempt"]; got != tc.delay {
						t.Errorf("B skipped an instant as too late after an attempt of %v, want %v", got, tc.delay)
					}
					skips++
				}
				for i := range instants {
					p := first.Add(time.Duration(i) * every)
					want := []string{tc.want}
					if tc.want == "" {
						want = nil
					}
					if who := by[p.UTC()]; !slices.Equal(who, want) {
						t.Errorf("instant %s ran by %v, want %v", p.Format("15:04:05.000"), who, want)
					}
				}
				wantSkips := instants // each answer past half the hold
				if tc.want == "B" {
					wantSkips = 0
				}
				if skips != wantSkips {
					t.Errorf("B skipped %d instants as too late, want %d", skips, wantSkips)
				}
			})
		})
	}
}
