package schedule_test

import (
	"context"
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
		drv := slowInspect{Driver: memory.New(), late: 50 * time.Millisecond}
		m := newMutex(t, drv)
		log, obs := logs()
		s, err := schedule.New(schedule.Options{Mutex: m, Logger: log},
			schedule.Job{Name: "j", Every: every, Exclusive: true, TTL: 900 * time.Millisecond, Run: func(context.Context) error { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		planned := time.Now().Truncate(every).Add(every)
		time.Sleep(time.Until(planned.Add(-680 * time.Millisecond)))
		if _, err := drv.Acquire(context.Background(), drivers.AcquireRequest{
			Key: m.Prefix() + schedule.LockPrefix + "j", Token: "dead~app~host~1", TTL: time.Second,
		}); err != nil {
			t.Fatal(err)
		}
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Until(planned.Add(time.Second)))
		synctest.Wait()
		stop(t, s)
		for _, e := range obs.FilterMessage("exclusive job's instant interrupted on another instance").All() {
			if at, _ := e.ContextMap()["planned"].(time.Time); at.Equal(planned) {
				return
			}
		}
		for _, e := range obs.All() {
			t.Logf("%s %s %s %v", e.Time.Format("15:04:05.000"), e.Level, e.Message, e.ContextMap())
		}
		t.Fatalf("no warning of the instant %s interrupted", planned.Format("15:04:05.000"))
	})
}
