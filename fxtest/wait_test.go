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

// TestRequireWaits: the assertions wait for a state reached later, and fail
// after WaitBound when it never comes.
func TestRequireWaits(t *testing.T) {
	bubble.Unpool(t) // the component's waiters must not leave the bubble
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		drv := memory.New()
		m := fxtest.New(t, component.Options{Driver: drv, Name: "a"})
		other := fxtest.New(t, component.Options{Driver: drv, Name: "b"})
		acquired := make(chan *component.Lock, 1)
		go func() {
			time.Sleep(time.Second)
			l, err := m.Acquire(ctx, "x")
			if err != nil {
				t.Error(err)
			}
			acquired <- l
		}()
		start := time.Now()
		l := fxtest.RequireHeld(t, m, "x")
		if got := time.Since(start); l != <-acquired || got < time.Second || got > time.Second+10*time.Millisecond {
			t.Fatalf("RequireHeld returned %v after %v; want the lock acquired after 1 s", l, time.Since(start))
		}
		go func() {
			time.Sleep(time.Second)
			if _, err := l.Release(ctx); err != nil {
				t.Error(err)
			}
		}()
		fxtest.RequireFree(t, other, "x")
		fxtest.RequireNotHeld(t, m, "x")
		if got := time.Since(start); got < 2*time.Second || got > 2*time.Second+20*time.Millisecond {
			t.Fatalf("RequireFree returned %v after the start, want 2 s (a poll's pause later at most)", got)
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
