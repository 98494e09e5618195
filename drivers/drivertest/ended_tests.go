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
	ctx := ctxT(t)
	d := s.driver(t)
	key, tok := "drivertest:"+name(t), token()
	if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: 10 * time.Second}); err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
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
	if ok, err := d.Extend(ctx, key, tok, 10*time.Second); !ok || err != nil {
		t.Fatalf("Extend after calls with an ended context = %v, %v; want true", ok, err)
	}
	if ok, err := d.Release(ctx, key, tok); !ok || err != nil {
		t.Fatalf("Release = %v, %v; want true", ok, err)
	}
}

// testDeadlineMidCall: an Extend whose context ends while it runs (short
// deadlines, so that some end before the call, some during it and some
// after) confirms the lock or returns an error, and never loses it: the
// store must not free a lock because its caller stopped waiting.
func (s *suite) testDeadlineMidCall(t *testing.T) {
	ctx := ctxT(t)
	d := s.driver(t)
	key, tok := "drivertest:"+name(t), token()
	if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: 10 * time.Second}); err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	for i := range 100 {
		short, cancel := context.WithTimeout(ctx, time.Duration(20+i*20)*time.Microsecond)
		ok, err := d.Extend(short, key, tok, 10*time.Second)
		cancel()
		if !ok && err == nil {
			t.Fatalf("Extend %d with a deadline of %v = false, nil: it reports a held lock lost", i, time.Duration(20+i*20)*time.Microsecond)
		}
	}
	if ok, err := d.Extend(ctx, key, tok, 10*time.Second); !ok || err != nil {
		t.Fatalf("Extend after calls cut by their deadlines = %v, %v; want true", ok, err)
	}
	if ok, err := d.Release(ctx, key, tok); !ok || err != nil {
		t.Fatalf("Release = %v, %v; want true", ok, err)
	}
}
