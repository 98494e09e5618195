package fxtest_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers/memory"
	"github.com/mutexfx/mutexfx/fxtest"
	"github.com/mutexfx/mutexfx/internal/bubble"
)

// TestRequireWaits: the assertions wait for a state reached while they
// wait (once every other goroutine of the bubble is blocked:
// synctest.Wait), notice it a poll's pause later at most, and fail after
// WaitBound when it never comes.
func TestRequireWaits(t *testing.T) {
	bubble.Unpool(t) // the component's waiters must not leave the bubble
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		drv := memory.New()
		m := fxtest.New(t, component.Options{Driver: drv, Name: "a"})
		other := fxtest.New(t, component.Options{Driver: drv, Name: "b"})
		changes := make(chan time.Time, 1) // when the state changed
		acquired := make(chan *component.Lock, 1)
		go func() {
			synctest.Wait() // RequireHeld found no lock and waits
			l, err := m.Acquire(ctx, "x")
			if err != nil {
				t.Error(err)
			}
			changes <- time.Now()
			acquired <- l
		}()
		start := time.Now()
		l := fxtest.RequireHeld(t, m, "x")
		at := <-changes
		if got := time.Since(at); l != <-acquired || !time.Now().After(start) || got > 10*time.Millisecond {
			t.Fatalf("RequireHeld returned %v %v after the acquisition (%v after its start); want the lock, a poll's pause later at most",
				l, got, time.Since(start))
		}
		go func() {
			synctest.Wait() // RequireFree found the lock held and waits
			if _, err := l.Release(ctx); err != nil {
				t.Error(err)
			}
			changes <- time.Now()
		}()
		start = time.Now()
		fxtest.RequireFree(t, other, "x")
		fxtest.RequireNotHeld(t, m, "x")
		at = <-changes
		if got := time.Since(at); !time.Now().After(start) || got > 20*time.Millisecond {
			t.Fatalf("RequireFree and RequireNotHeld returned %v after the release (%v after their start), want a poll's pause later at most",
				got, time.Since(start))
		}

		start = time.Now()
		if msg := fatal(t, func(tb testing.TB) { fxtest.RequireHeld(tb, m, "never") }); !strings.Contains(msg, "not held") {
			t.Errorf("RequireHeld of a lock never held: failure %q", msg)
		}
		if got := time.Since(start); got < fxtest.WaitBound {
			t.Errorf("RequireHeld gave up after %v, want %v", got, fxtest.WaitBound)
		}
		if _, err := other.Acquire(ctx, "y"); err != nil {
			t.Fatal(err)
		}
		if msg := fatal(t, func(tb testing.TB) { fxtest.RequireFree(tb, m, "y") }); !strings.Contains(msg, "still held") {
			t.Errorf("RequireFree of a held lock: failure %q", msg)
		}
		if msg := fatal(t, func(tb testing.TB) { fxtest.RequireNotHeld(tb, other, "y") }); !strings.Contains(msg, "still held") {
			t.Errorf("RequireNotHeld of a held lock: failure %q", msg)
		}
	})
}
