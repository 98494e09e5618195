package component

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers/memory"
)

type callerKey struct{}

// TestRunContext: fn's ctx in Do says "ended" as soon as the lock ends or
// is past its tracked expiry — in the call that ends it, not later — and
// keeps the caller's cause when the caller's ctx ends.
func TestRunContext(t *testing.T) {
	why := errors.New("request ended")
	for _, tc := range []struct {
		name string
		// end ends the lock or the caller's ctx, and reports fn's
		// ctx.Err() right after (m.mu may be held by end)
		end  func(m *Mutex, l *Lock, ctx context.Context, cancel context.CancelCauseFunc) error
		want error
	}{
		{"PastExpiry", func(m *Mutex, l *Lock, ctx context.Context, _ context.CancelCauseFunc) error {
			// the expiry passes while the scheduler sleeps until the
			// renewal, a minute away
			m.mu.Lock()
			l.expiry = time.Now().Add(-time.Millisecond)
			m.mu.Unlock()
			return ctx.Err()
		}, ErrLost},
		{"LockLost", func(m *Mutex, l *Lock, ctx context.Context, _ context.CancelCauseFunc) error {
			// asked while m.mu is still held by the call that lost it:
			// nothing else (a goroutine of its own) can have cancelled
			// fn's ctx yet
			m.mu.Lock()
			defer m.mu.Unlock()
			m.lose(l, CauseStoreReported, "test")
			return ctx.Err()
		}, ErrLost},
		{"CallerEnded", func(_ *Mutex, _ *Lock, ctx context.Context, cancel context.CancelCauseFunc) error {
			cancel(why)
			return ctx.Err()
		}, why},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newOn(t, &remote{Driver: memory.New()}, time.Minute)
			deadline := time.Now().Add(time.Hour)
			base, stop := context.WithDeadline(context.WithValue(context.Background(), callerKey{}, "v"), deadline)
			defer stop()
			caller, cancel := context.WithCancelCause(base)
			defer cancel(nil)
			ran := false
			err := m.Do(caller, "x", func(ctx context.Context, l *Lock) error {
				ran = true
				if LockFrom(ctx) != l || ctx.Value(callerKey{}) != "v" {
					t.Errorf("fn's ctx: lock %v, caller's value %v", LockFrom(ctx), ctx.Value(callerKey{}))
				}
				if d, ok := ctx.Deadline(); !ok || !d.Equal(deadline) {
					t.Errorf("fn's ctx deadline %v, %v; want the caller's %v", d, ok, deadline)
				}
				if ctx.Err() != nil {
					t.Fatalf("fn's ctx ended at the start: %v", context.Cause(ctx))
				}
				if err := tc.end(m, l, ctx, cancel); err == nil {
					t.Fatal("fn's ctx says the lock is held")
				}
				select {
				case <-ctx.Done():
				default:
					t.Error("fn's ctx Err is set but Done is open")
				}
				return context.Cause(ctx)
			})
			if !ran || !errors.Is(err, tc.want) {
				t.Fatalf("Do = %v (fn ran: %v); want %v", err, ran, tc.want)
			}
		})
	}
}

// TestRunContextAfterRelease: once Do returned, fn's ctx (kept by a
// goroutine of fn) is ended with ErrReleased.
func TestRunContextAfterRelease(t *testing.T) {
	m := newOn(t, memory.New(), time.Minute)
	var kept context.Context
	if err := m.Do(context.Background(), "x", func(ctx context.Context, _ *Lock) error {
		kept = ctx
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if kept.Err() == nil || !errors.Is(context.Cause(kept), ErrReleased) {
		t.Fatalf("fn's ctx after Do: %v, %v; want ErrReleased", kept.Err(), context.Cause(kept))
	}
}

// TestRunContextCallerDeadline: fn's ctx ends with the caller's deadline,
// with the caller's Err (not just context.Canceled) and cause.
func TestRunContextCallerDeadline(t *testing.T) {
	m := newOn(t, memory.New(), time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := m.Do(ctx, "x", func(ctx context.Context, _ *Lock) error {
		<-ctx.Done()
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Errorf("fn's ctx Err %v; want context.DeadlineExceeded", ctx.Err())
		}
		return context.Cause(ctx)
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("fn's ctx cause %v; want context.DeadlineExceeded", err)
	}
}
