package drivertest

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/poll"
)

// CloseCutsStalledCall checks that Close does not wait past its ctx for a
// call stuck on a stalled link. d reaches its store through a proxy that
// stall stops and whose blocked reports how many of its directions hold
// bytes back. With a lock held, the link stalls, and an Extend of the lock
// and a waiting Acquire of its name, with contexts that never end, are sent
// into it; then d.Close with a 300ms ctx must return within 2s, and both
// calls soon after, reporting the lock not kept (Extend false, Acquire not
// acquired) or an error wrapping errClosed. resume heals the link at the
// end.
func CloseCutsStalledCall(t *testing.T, d drivers.Driver, errClosed error, stall, resume func(), blocked func() int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key, tok := "closecut:"+rand.Text(), rand.Text()
	if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute}); err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	stall()
	defer resume()
	done := ExtendAsync(context.Background(), d, key, tok, time.Minute)
	// and a waiting acquisition of the held name, which may need a new
	// connection (advisory mode)
	waited := AcquireAsync(context.Background(), d, drivers.AcquireRequest{Key: key, Token: rand.Text(), TTL: time.Minute, Wait: time.Minute})
	waitFor(t, time.Minute, "a call to reach the stalled link", func() bool { return blocked() > 0 })
	// both calls in the stall, as a rule (a background probe may count
	// too; a call cut before it is sent must end as well)
	poll.Until(time.Second, poll.Every, func() bool { return blocked() >= 2 })
	closeCutting(t, d)
	select {
	case r := <-done:
		t.Logf("Extend cut by Close = %v, %v", r.Held, r.Err)
		if r.Held {
			t.Fatal("Extend cut by Close reports the lock kept")
		}
		if r.Err != nil && !errors.Is(r.Err, errClosed) {
			t.Fatalf("Extend cut by Close: error %v; want one wrapping %v", r.Err, errClosed)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Extend still stuck 2s after Close returned")
	}
	wantNotAcquired(t, "waiting Acquire", waited, errClosed)
}

// CloseCutsStalledDial is CloseCutsStalledCall for a driver that has not
// connected yet: the link stalls first, so that its first Acquire is stuck
// opening a connection; Close with a 300ms ctx must return within 2s, and
// the Acquire soon after, not acquired, with no error or one wrapping
// errClosed.
func CloseCutsStalledDial(t *testing.T, d drivers.Driver, errClosed error, stall, resume func(), blocked func() int) {
	t.Helper()
	stall()
	defer resume()
	done := AcquireAsync(context.Background(), d, drivers.AcquireRequest{Key: "closecut:" + rand.Text(), Token: rand.Text(), TTL: time.Minute})
	waitFor(t, time.Minute, "the first Acquire to reach the stalled link", func() bool { return blocked() > 0 })
	closeCutting(t, d)
	wantNotAcquired(t, "first Acquire", done, errClosed)
}

// closeCutting closes d with a 300ms ctx and fails if that takes over 2s.
func closeCutting(t *testing.T, d drivers.Driver) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := d.Close(ctx)
	took := time.Since(start)
	t.Logf("Close = %v after %v", err, took)
	if took > 2*time.Second {
		t.Fatalf("Close took %v with a 300ms ctx", took)
	}
}

// wantNotAcquired waits up to 2s for what, an Acquire cut by Close, and
// fails unless it reports the lock not acquired, with no error or one
// wrapping errClosed.
func wantNotAcquired(t *testing.T, what string, done <-chan Outcome, errClosed error) {
	t.Helper()
	select {
	case a := <-done:
		t.Logf("%s cut by Close = %+v, %v", what, a.Res, a.Err)
		if a.Res.Acquired {
			t.Fatalf("%s cut by Close reports the lock acquired", what)
		}
		if a.Err != nil && !errors.Is(a.Err, errClosed) {
			t.Fatalf("%s cut by Close: error %v; want one wrapping %v", what, a.Err, errClosed)
		}
	case <-time.After(2 * time.Second):
		t.Fatalf("%s still stuck 2s after Close returned", what)
	}
}
