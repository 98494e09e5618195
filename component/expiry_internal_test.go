package component

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mutexfx/mutexfx/drivers/memory"
)

// TestAskingChecksExpiry: a lock past its tracked expiry is reported lost
// to whoever asks — its context's Err, Lock.Err, Lock.Held, Mutex.Held —
// even before the scheduler's timer (set for the lock's renewal, a minute
// away here) ends it, and the store is asked to free it. Past it by the
// monotonic clock, or by the wall clock alone: a host suspended past the
// expiry resumes with its monotonic clock behind (before, the lock then
// read as held until the timer fired).
func TestAskingChecksExpiry(t *testing.T) {
	Unpooled(t)
	var skew atomic.Int64 // the wall clock's lead over the monotonic one
	testHookWall = func(w time.Time) time.Time { return w.Add(time.Duration(skew.Load())) }
	t.Cleanup(func() { testHookWall = nil }) // after the Mutexes closed (cleanups run last first)
	for _, pass := range []struct {
		name string
		pass func(m *Mutex, l *Lock)
	}{
		{"monotonic", func(m *Mutex, l *Lock) {
			m.mu.Lock()
			l.expiry = time.Now().Add(-time.Millisecond)
			m.mu.Unlock()
		}},
		{"wall clock", func(*Mutex, *Lock) { skew.Store(int64(2 * time.Minute)) }},
	} {
		for _, tc := range []struct {
			name string
			ask  func(l *Lock, ctx context.Context) bool // reports "still held"
		}{
			{"ContextErr", func(_ *Lock, ctx context.Context) bool { return ctx.Err() == nil }},
			{"LockErr", func(l *Lock, _ context.Context) bool { return l.Err() == nil }},
			{"Held", func(l *Lock, _ context.Context) bool { return l.Held() }},
			{"MutexHeld", func(l *Lock, _ context.Context) bool { return len(l.m.Held()) == 1 }},
		} {
			t.Run(pass.name+"/"+tc.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					skew.Store(int64(50 * time.Second)) // ahead, but not past the expiry
					ctx := context.Background()
					md := memory.New()
					m := newOn(t, &remote{Driver: md}, time.Minute)
					l, err := m.Acquire(ctx, "x")
					if err != nil {
						t.Fatal(err)
					}
					lctx := l.Context()
					if !tc.ask(l, lctx) {
						t.Fatal("a fresh lock is reported not held")
					}
					// The expiry passes; the scheduler sleeps until the renewal.
					pass.pass(m, l)
					if tc.ask(l, lctx) {
						t.Fatal("a lock past its expiry is reported held")
					}
					if tc.name == "MutexHeld" {
						return // Mutex.Held leaves the lock to the others
					}
					select {
					case <-lctx.Done():
					default:
						t.Fatal("the lock's context is not done once it was reported lost")
					}
					if !errors.Is(context.Cause(lctx), ErrLost) || !errors.Is(l.Err(), ErrLost) {
						t.Fatalf("cause %v, Err %v; want ErrLost", context.Cause(lctx), l.Err())
					}
					// the store is asked to free it (in the background): once
					// the bubble's goroutines wait, it has been
					synctest.Wait()
					if _, held, err := md.Inspect(ctx, l.key); err != nil || held {
						t.Fatalf("the expired lock was not released in the store (held %v, err %v)", held, err)
					}
				})
			})
		}
	}
}

// TestHeldOrderPastHalfTheSequence: Held is in acquisition order even when
// the acquisition numbers are 2^63 apart (a difference converted to int
// has the wrong sign there, and past 2^31 on 32-bit platforms).
func TestHeldOrderPastHalfTheSequence(t *testing.T) {
	m := newOn(t, memory.New(), time.Minute)
	ctx := context.Background()
	a, err := m.Acquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	m.seq += 1 << 63
	m.mu.Unlock()
	b, err := m.Acquire(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Held(); len(got) != 2 || got[0] != a || got[1] != b {
		t.Fatalf("Held = %v; want a then b", got)
	}
}
