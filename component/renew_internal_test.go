package component

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mutexfx/mutexfx/drivers/memory"
)

// TestShortLockWhileSchedulerSleeps: once the scheduler sleeps until a 1 h
// lock's first renewal (20 min away), a lock with a short ttl must bring
// that wake-up forward and be renewed, not lost.
func TestShortLockWhileSchedulerSleeps(t *testing.T) {
	Unpooled(t)
	synctest.Test(t, func(t *testing.T) {
		m, err := New(Options{Driver: memory.New(), TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close(context.Background())
		ctx := context.Background()
		long, err := m.Acquire(ctx, "long")
		if err != nil {
			t.Fatal(err)
		}
		waitLocked(t, m, "the scheduler planning the long lock's renewal", func() bool {
			return time.Until(m.nextWake) > 10*time.Minute
		})
		const ttl = 100 * time.Millisecond
		short, err := m.Acquire(ctx, "short", WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-short.Done():
			t.Fatalf("short lock lost: %v", short.Err())
		case <-time.After(4 * ttl): // the property: it outlives its ttl, renewed
		}
		if !short.Held() || !long.Held() {
			t.Fatalf("held: short %v, long %v", short.Held(), long.Held())
		}
	})
}
