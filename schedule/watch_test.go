package schedule_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/memory"
	"github.com/mutexfx/mutexfx/internal/bubble"
	"github.com/mutexfx/mutexfx/schedule"
)

// slowInspect is the memory store whose Inspect answers late while the
// lock is held, as a loaded store does: the remaining ttl it tells was
// read that long before the caller gets it.
type slowInspect struct {
	*memory.Driver
	late time.Duration
}

func (d slowInspect) Inspect(ctx context.Context, key string) (drivers.LockInfo, bool, error) {
	info, held, err := d.Driver.Inspect(ctx, key)
	if held {
		time.Sleep(d.late)
	}
	return info, held, err
}

// TestWatchSlowInspectTellsExpiry: a holder that stopped renewing (dead)
// has 320 ms left at the instant; the skipping instance's look, answered
// 50 ms late, says so; its next look, a third of the 900 ms ttl after the
// answer, finds the lock expired. That is an interrupted instant: the
// remaining ttl counts from when the look was sent (the store read it
// then or later), not from its answer. (Counted from the answer, 300 ms
// between the looks read as less than the 320 ms left: the expiry passed
// for a release, and no warning was logged.)
func TestWatchSlowInspectTellsExpiry(t *testing.T) {
	bubble.Unpool(t)
	synctest.Test(t, func(t *testing.T) {
		const every = 4 * time.Second
		const warning = "exclusive job's instant interrupted on another instance"
		drv := slowInspect{Driver: memory.New(), late: 50 * time.Millisecond}
		m := newMutex(t, drv)
		log, obs, warned := logsUntil(warning)
		s, err := schedule.New(schedule.Options{Mutex: m, Logger: log},
			schedule.Job{Name: "j", Every: every, Exclusive: true, TTL: 900 * time.Millisecond, Run: func(context.Context) error { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			stop(t, s) // a failure's end included
			if t.Failed() {
				for _, e := range obs.All() {
					t.Logf("%s %s %s %v", e.Time.Format("15:04:05.000"), e.Level, e.Message, e.ContextMap())
				}
			}
		})
		planned := time.Now().Truncate(every).Add(every)
		// the dead holder's lock: 320 ms left at the instant
		if _, err := drv.Acquire(context.Background(), drivers.AcquireRequest{
			Key: m.Prefix() + schedule.LockPrefix + "j", Token: "dead~app~host~1", TTL: time.Until(planned) + 320*time.Millisecond,
		}); err != nil {
			t.Fatal(err)
		}
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		await(t, time.Until(planned.Add(time.Second)), "the warning", warned)
		stop(t, s)
		for _, e := range obs.FilterMessage(warning).All() {
			if at, _ := e.ContextMap()["planned"].(time.Time); at.Equal(planned) {
				return
			}
		}
		t.Fatalf("no warning of the instant %s interrupted", planned.Format("15:04:05.000"))
	})
}

// TestRerunAttemptAnsweredLate: an exclusive job every 4 s (hold 2 s, ttl
// 1 s) whose lock, at an instant, is held by a dead holder: it expires
// 2.5 s past the instant, after the hold. Instances B and C, with RerunInterrupted, skipped the
// instant and notice the expiry together; C's attempt to run it again is
// answered at once, B's (a slow store) delay later. C's re-run keeps the
// lock for a hold from then, but not into the last half hold before the
// next instant (3 s past this one), so B's attempt finds it held, or,
// answered past half that window, C's release: B then releases the lock
// at once and does not run the instant a third time. Alone, B re-runs it
// when answered within half the window, not later.
func TestRerunAttemptAnsweredLate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prompt string        // instance C ("" for none), whose attempts reach the store at once, watches too
		delay  time.Duration // of B's attempts
		want   string        // the instance re-running the instant, "" for none
		late   bool          // B's answer comes past half the window (0.24 s)
	}{
		{"while another re-runs it", "C", 100 * time.Millisecond, "C", false},
		{"after another re-ran it", "C", 600 * time.Millisecond, "C", true},
		{"alone, within half the window", "", 100 * time.Millisecond, "B", false},
		{"alone, past half the window", "", 600 * time.Millisecond, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bubble.Unpool(t)
			synctest.Test(t, func(t *testing.T) {
				const every = 4 * time.Second
				drv := memory.New()
				r := newRuns()
				job := func(who string) schedule.Job {
					return schedule.Job{Name: "j", Every: every, Exclusive: true, RerunInterrupted: true, Run: r.job(who)}
				}
				scheds, mB, obsB := slowAndPrompt(t, drv, tc.delay, job, tc.prompt)
				planned := time.Now().Truncate(every).Add(every)
				key := mB.Prefix() + schedule.LockPrefix + "j"
				// the dead holder's lock: it expires 2.5 s past the instant
				if _, err := drv.Acquire(context.Background(), drivers.AcquireRequest{
					Key: key, Token: "dead~app~host~1", TTL: time.Until(planned) + 2500*time.Millisecond,
				}); err != nil {
					t.Fatal(err)
				}
				// The re-run's release at the end of the window, and with
				// C, B's of a lock it got past half the window, end the
				// scenario.
				wantReleases := 1
				if tc.prompt != "" && tc.late {
					wantReleases = 2
				}
				ended := releases(t, drv, key).reached(wantReleases)
				for _, s := range scheds {
					if err := s.Start(context.Background()); err != nil {
						t.Fatal(err)
					}
				}
				// The expiry is noticed 2.52 s past the instant: the window ends
				// at 3 s. B's answer comes by 3.12 s; the next instant at 4 s.
				await(t, time.Until(planned.Add(3500*time.Millisecond)), "the releases ending the re-runs", ended)
				synctest.Wait()
				if _, held, err := drv.Inspect(context.Background(), key); err != nil || held {
					t.Errorf("the job's lock is held (%v) past the re-runs' window and B's attempt", err)
				}
				for _, s := range scheds {
					stop(t, s)
				}

				var want []string
				if tc.want != "" {
					want = []string{tc.want}
				}
				if who := r.snapshot()[planned.UTC()]; !slices.Equal(who, want) {
					t.Errorf("instant %s ran by %v, want %v", planned.Format("15:04:05.000"), who, want)
				}
				var skips int
				for _, e := range obsB.FilterMessageSnippet("not run again: too late").All() {
					if got := e.ContextMap()["attempt"]; got != tc.delay {
						t.Errorf("B refused a re-run after an attempt of %v, want %v", got, tc.delay)
					}
					skips++
				}
				wantSkips := 0
				if tc.late {
					wantSkips = 1
				}
				if skips != wantSkips {
					t.Errorf("B refused %d re-runs as too late, want %d", skips, wantSkips)
				}
			})
		})
	}
}
