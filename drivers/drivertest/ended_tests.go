package drivertest

import (
	"context"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
)

// testEndedContext: an Extend (and a batch Renew) whose context has
// already ended either confirms the lock or reports an error; it never
// answers "not held" for a lock it holds, and the lock stays held: the
// next Extend with a live context confirms it, and Release frees it.
func (s *suite) testEndedContext(t *testing.T) {
	ctx, d, key, tok := s.heldLock(t)
	ended, cancel := context.WithCancel(ctx)
	cancel()
	if ok, err := d.Extend(ended, key, tok, 10*time.Second); !ok && err == nil {
		t.Fatal("Extend with an ended context = false, nil: it reports a held lock lost")
	}
	if r, ok := d.(drivers.Renewer); ok {
		res := r.Renew(ended, []drivers.Lease{{Key: key, Token: tok, TTL: 10 * time.Second}})
		if len(res) != 1 || (!res[0].Held && res[0].Err == nil) {
			t.Fatalf("Renew with an ended context = %+v: it reports a held lock lost", res)
		}
	}
	stillHeld(t, ctx, d, key, tok, "calls with an ended context")
}

// testDeadlineMidCall: an Extend whose context ends while it runs (short
// deadlines, so that some end before the call, some during it and some
// after) confirms the lock or returns an error, and never loses it: the
// store must not free a lock because its caller stopped waiting.
func (s *suite) testDeadlineMidCall(t *testing.T) {
	ctx, d, key, tok := s.heldLock(t)
	for i := range 100 {
		short, cancel := context.WithTimeout(ctx, time.Duration(20+i*20)*time.Microsecond)
		ok, err := d.Extend(short, key, tok, 10*time.Second)
		cancel()
		if !ok && err == nil {
			t.Fatalf("Extend %d with a deadline of %v = false, nil: it reports a held lock lost", i, time.Duration(20+i*20)*time.Microsecond)
		}
	}
	stillHeld(t, ctx, d, key, tok, "calls cut by their deadlines")
}

// heldLock acquires a fresh key for 10s on the suite's driver.
func (s *suite) heldLock(t *testing.T) (context.Context, drivers.Driver, string, string) {
	t.Helper()
	ctx := ctxT(t)
	d := s.driver(t)
	key, tok := "drivertest:"+name(t), token()
	if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: 10 * time.Second}); err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	return ctx, d, key, tok
}

// stillHeld checks that tok still holds key after what: an Extend with a
// live context confirms it, and Release frees it.
func stillHeld(t *testing.T, ctx context.Context, d drivers.Driver, key, tok, after string) {
	t.Helper()
	if ok, err := d.Extend(ctx, key, tok, 10*time.Second); !ok || err != nil {
		t.Fatalf("Extend after %s = %v, %v; want true", after, ok, err)
	}
	if ok, err := d.Release(ctx, key, tok); !ok || err != nil {
		t.Fatalf("Release = %v, %v; want true", ok, err)
	}
}
