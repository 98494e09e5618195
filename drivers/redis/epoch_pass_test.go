package redis

import (
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestNoHandoffDuringEpochWait: while an epoch's wait runs, a release with
// a waiter queued frees the lock instead of handing it over: the releaser
// may hold a copy the server kept from before a replication cut, after the
// lock went to another holder on the old master. The waiter meets the
// wait in its own acquire and gets the lock only once the wait is over.
func TestNoHandoffDuringEpochWait(t *testing.T) {
	s := testutil.StartRedis(t)
	known(t, s)
	d := rawDriver(t, Options{Addrs: []string{s.Addr}})
	w := rawDriver(t, Options{Addrs: []string{s.Addr}})
	ctx := t.Context()
	if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: "x", Token: "a", TTL: 10 * time.Second}); err != nil || !res.Acquired {
		t.Fatalf("Acquire(a) = %+v, %v", res, err)
	}
	type result struct {
		res drivers.AcquireResult
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	go func() {
		res, err := w.Acquire(ctx, drivers.AcquireRequest{Key: "x", Token: "b", TTL: 10 * time.Second, Wait: 10 * time.Second})
		done <- result{res, err, time.Now()}
	}()
	eventually(t, 5*time.Second, "the waiter is queued", func() bool {
		n, err := s.Command("ZCARD", tag("x")+queueSuffix)
		return err == nil && n == "1"
	})
	const wait = 2 * time.Second
	started := time.Now()
	if _, err := s.Command("SET", epochKey+waitSuffix, "0", "PX", "2000"); err != nil {
		t.Fatal(err)
	}
	if ok, err := d.Release(ctx, "x", "a"); !ok || err != nil {
		t.Fatalf("Release(a) = %v, %v", ok, err)
	}
	if v, err := s.Command("GET", tag("x")); err != nil || v != "" {
		t.Fatalf("after the release the lock is %q (%v); want free: no hand-off during the wait", v, err)
	}
	r := <-done
	if r.err != nil || !r.res.Acquired {
		t.Fatalf("the waiter's Acquire = %+v, %v; want acquired after the wait", r.res, r.err)
	}
	if got := r.at.Sub(started); got < wait {
		t.Fatalf("the waiter got the lock %v after the wait began; want no grant within %v", got, wait)
	}
}
