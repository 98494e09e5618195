package component

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mutexfx/mutexfx/drivers/memory"
)

// lateExtend is the memory store as a network store (remote), whose
// Extend fails at once (its reply is lost) while its request is still on
// its way: it reaches the store when the test lands it, after requests
// sent later (another connection's) were applied.
type lateExtend struct {
	*remote
	mu   sync.Mutex
	land func() // applies the last failed Extend in the store
}

func (d *lateExtend) Extend(_ context.Context, key, token string, ttl time.Duration) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.land = func() { _, _ = d.Driver.Extend(context.Background(), key, token, ttl) }
	return false, errors.New("connection reset")
}

// TestFailedExtendLandsLate: a failed Extend to a shorter ttl may still
// reach the store after the renewal that follows it. The store then keeps
// the lock for the shorter ttl only: the holder must not believe it holds
// the lock after the store could have given it to another. (Before: the
// renewal after the failure renewed with the longer ttl, and the holder
// kept its lock 3 s while the store freed it after 300 ms.)
func TestFailedExtendLandsLate(t *testing.T) {
	Unpooled(t)
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		d := &lateExtend{remote: &remote{Driver: memory.New()}}
		m := newOn(t, d, 3*time.Second)
		other := newOn(t, d, 3*time.Second)
		l, err := m.Acquire(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Extend(ctx, 300*time.Millisecond); err == nil {
			t.Fatal("Extend: no error")
		}
		synctest.Wait() // the renewal sent at once after the failure is done
		d.mu.Lock()
		d.land()
		d.mu.Unlock()
		landed := time.Now()
		for range 100 {
			time.Sleep(10 * time.Millisecond)
			l2, err := other.TryAcquire(ctx, "a")
			if err == nil && l.Err() == nil {
				t.Fatalf("another holder got the lock %v after the late Extend landed; the first still believes it holds it", time.Since(landed))
			}
			if l2 != nil {
				_, _ = l2.Release(ctx)
				return
			}
		}
	})
}
