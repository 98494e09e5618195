package component

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers/memory"
)

// TestAskingChecksExpiry: a lock past its tracked expiry is reported lost
// to whoever asks — its context's Err, Lock.Err, Lock.Held — even before
// the scheduler's timer (set for the lock's renewal, a minute away here)
// ends it, and the store is asked to free it.
func TestAskingChecksExpiry(t *testing.T) {
	for _, tc := range []struct {
		name string
		ask  func(l *Lock, ctx context.Context) bool // reports "still held"
	}{
		{"ContextErr", func(_ *Lock, ctx context.Context) bool { return ctx.Err() == nil }},
		{"LockErr", func(l *Lock, _ context.Context) bool { return l.Err() == nil }},
		{"Held", func(l *Lock, _ context.Context) bool { return l.Held() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
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
			m.mu.Lock()
			l.expiry = time.Now().Add(-time.Millisecond)
			m.mu.Unlock()
			if tc.ask(l, lctx) {
				t.Fatal("a lock past its expiry is reported held")
			}
			select {
			case <-lctx.Done():
			default:
				t.Fatal("the lock's context is not done once it was reported lost")
			}
			if !errors.Is(context.Cause(lctx), ErrLost) || !errors.Is(l.Err(), ErrLost) {
				t.Fatalf("cause %v, Err %v; want ErrLost", context.Cause(lctx), l.Err())
			}
			// the store is asked to free it (in the background)
			deadline := time.Now().Add(5 * time.Second)
			for {
				if _, held, err := md.Inspect(ctx, l.key); err == nil && !held {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the expired lock was not released in the store")
				}
				time.Sleep(time.Millisecond)
			}
		})
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
