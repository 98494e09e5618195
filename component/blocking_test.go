package component_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
)

// blocker states BlockingWait; when block is set it waits req.Wait in the
// store before answering "taken", else it answers at once (as a store
// without a free connection to block on does).
type blocker struct {
	*faulty
	block   bool
	maxWait atomic.Int64 // longest req.Wait seen
}

func (b *blocker) Features() drivers.Features {
	f := b.faulty.Features()
	f.BlockingWait = true
	return f
}

func (b *blocker) Acquire(ctx context.Context, req drivers.AcquireRequest) (drivers.AcquireResult, error) {
	if int64(req.Wait) > b.maxWait.Load() {
		b.maxWait.Store(int64(req.Wait))
	}
	res, err := b.faulty.Acquire(ctx, req)
	if err == nil && !res.Acquired && b.block && req.Wait > 0 {
		select {
		case <-time.After(req.Wait):
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
	return res, err
}

func TestBlockingWaitDrivers(t *testing.T) {
	for _, c := range []struct {
		block    bool
		min, max int32
	}{
		{block: true, min: 2, max: 4},   // 1 s timeout, waits of 400 ms: asks again at once
		{block: false, min: 3, max: 12}, // answered at once: the normal backoff from 50 ms
	} {
		f := newFaulty()
		holder := newMutex(t, component.Options{Driver: f})
		ctx := context.Background()
		if _, err := holder.Acquire(ctx, "x"); err != nil {
			t.Fatal(err)
		}
		waiter := newMutex(t, component.Options{Driver: &blocker{faulty: f, block: c.block}, RetryDelay: 50 * time.Millisecond})
		before := f.acquires.Load()
		if _, err := waiter.Acquire(ctx, "x", component.WithTimeout(2500*time.Millisecond)); !errors.Is(err, component.ErrTimeout) {
			t.Fatal(err)
		}
		if n := f.acquires.Load() - before; n < c.min || n > c.max {
			t.Errorf("blocking %v: %d attempts in 2.5 s; want %d-%d", c.block, n, c.min, c.max)
		}
	}
}

// TestBlockingWaitBoundedByTTL: a store never blocks longer than a third of
// the ttl, so that a lock granted at the end of the wait, tracked from the
// attempt's start, is not already expired.
func TestBlockingWaitBoundedByTTL(t *testing.T) {
	f := newFaulty()
	holder := newMutex(t, component.Options{Driver: f})
	ctx := context.Background()
	if _, err := holder.Acquire(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	b := &blocker{faulty: f, block: true}
	waiter := newMutex(t, component.Options{Driver: b, TTL: 90 * time.Millisecond})
	if _, err := waiter.Acquire(ctx, "x", component.WithTimeout(300*time.Millisecond)); !errors.Is(err, component.ErrTimeout) {
		t.Fatal(err)
	}
	if w := time.Duration(b.maxWait.Load()); w <= 0 || w > 30*time.Millisecond {
		t.Fatalf("longest blocking wait %v with a 90 ms ttl; want (0, 30 ms]", w)
	}
}
