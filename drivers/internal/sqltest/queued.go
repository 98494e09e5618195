package sqltest

import (
	"context"
	"crypto/rand"
	"strconv"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// reclaimQueued checks that a free row a live waiter queues for stays, the
// waiter getting it before others, and that a free row whose waiters all
// gave up (more of them than an acquisition prunes at once) is reclaimed
// once their entries are dead, its name's fences still increasing.
func reclaimQueued(t *testing.T, rt ReclaimTable, count func() int, sweep func(context.Context) error) {
	if len(rt.Waiters) < 4 {
		t.Fatalf("%d waiters; want at least 4", len(rt.Waiters))
	}
	ctx := Context(t, time.Minute)
	var key, tok string
	var fence uint64
	// The live waiter's checks hold only while its entry is live: a run
	// too slow to finish them within half the liveness is tried again.
	for try := 0; ; try++ {
		key = "queued:" + strconv.Itoa(try)
		var judged bool
		if tok, fence, judged = liveWaiterFirst(ctx, t, rt, key, sweep, count); judged {
			break
		}
		if try == 2 {
			t.Fatalf("three runs slower than half the waiter liveness (%v)", rt.Liveness)
		}
	}
	// The other drivers queue behind the holder, give up; it releases.
	for _, d := range append([]drivers.Driver{rt.Driver}, rt.Waiters[1:]...) {
		attempt(ctx, t, d, key, time.Millisecond, false)
	}
	release(ctx, t, rt.Waiters[0], key, tok)
	reclaimed(ctx, t, rt, sweep, count)
	if _, f := attempt(ctx, t, rt.Driver, key, 0, true); f <= fence {
		t.Fatalf("fence %d after the row was reclaimed; want above %d", f, fence)
	}
}

// liveWaiterFirst has Waiters[0] queue for key while Driver holds it, then
// frees it, and checks that a reclaim round keeps the row and that the
// waiter gets it before Driver. It returns the waiter's token and fence,
// and judged false, having reclaimed the row, when the checks ended more
// than half the liveness after the waiter queued (its entry may have died).
func liveWaiterFirst(ctx context.Context, t *testing.T, rt ReclaimTable, key string, sweep func(context.Context) error, count func() int) (string, uint64, bool) {
	t.Helper()
	d, w := rt.Driver, rt.Waiters[0]
	held, _ := attempt(ctx, t, d, key, 0, true)
	start := time.Now()
	attempt(ctx, t, w, key, time.Millisecond, false) // w queues
	release(ctx, t, d, key, held)
	if err := sweep(ctx); err != nil {
		t.Fatal(err)
	}
	rows := count()
	tok := rand.Text()
	res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > rt.Liveness/2 {
		t.Logf("%v from queueing to the checks: more than half the liveness (%v)", took, rt.Liveness)
		if res.Acquired {
			release(ctx, t, d, key, tok)
		}
		reclaimed(ctx, t, rt, sweep, count) // the next run counts from 0
		return "", 0, false
	}
	if rows != 1 || res.Acquired {
		t.Fatalf("a free row with a live waiter: %d rows after a reclaim round, acquired by another driver: %v; want 1, false",
			rows, res.Acquired)
	}
	tok, fence := attempt(ctx, t, w, key, time.Millisecond, true)
	return tok, fence, true
}

// reclaimed runs reclaim rounds until the table is empty, failing the test
// when its rows, free, are not all gone once their waiters are dead.
func reclaimed(ctx context.Context, t *testing.T, rt ReclaimTable, sweep func(context.Context) error, count func() int) {
	t.Helper()
	testutil.Poll(t, rt.Liveness+10*time.Second, "the free rows of waiters that gave up to be reclaimed", func() bool {
		if err := sweep(ctx); err != nil {
			t.Fatal(err)
		}
		return count() == 0
	})
}

// attempt asks d for key with a new token, waiting up to wait, and fails
// the test unless it is acquired as want says. It returns the token and
// the fence.
func attempt(ctx context.Context, t *testing.T, d drivers.Driver, key string, wait time.Duration, want bool) (string, uint64) {
	t.Helper()
	tok := rand.Text()
	res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute, Wait: wait})
	if err != nil || res.Acquired != want {
		t.Fatalf("Acquire(%s) = %+v, %v; want acquired %v", key, res, err, want)
	}
	return tok, res.Fence
}

// release releases key held by tok through d, failing the test unless it
// did.
func release(ctx context.Context, t *testing.T, d drivers.Driver, key, tok string) {
	t.Helper()
	if ok, err := d.Release(ctx, key, tok); err != nil || !ok {
		t.Fatalf("Release(%s) = %v, %v", key, ok, err)
	}
}
