package component_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mutexfx/mutexfx/component"
)

// TestMisusePanicsNameTheMistake: every method of a Mutex New did not
// build, of a nil or hand-made *Lock, and every call given a nil ctx
// panics with a message that says what is wrong.
func TestMisusePanicsNameTheMistake(t *testing.T) {
	ctx := context.Background()
	var nilCtx context.Context
	fn := func(context.Context, *component.Lock) error { return nil }
	m := newMutex(t, component.Options{})
	held, err := m.Acquire(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	const noNew = "mutexfx: Mutex used without New"
	const nilLock = "mutexfx: method called on a nil *Lock"
	const noLock = "mutexfx: Lock used without Acquire"
	const nilCtxMsg = "mutexfx: nil context.Context"
	var zero component.Mutex
	var nilMutex *component.Mutex
	var none *component.Lock
	made := &component.Lock{}
	for _, tc := range []struct {
		name, want string
		call       func()
	}{
		{"zero Mutex Acquire", noNew, func() { _, _ = zero.Acquire(ctx, "x") }},
		{"zero Mutex TryAcquire", noNew, func() { _, _ = zero.TryAcquire(ctx, "x") }},
		{"zero Mutex Do", noNew, func() { _ = zero.Do(ctx, "x", fn) }},
		{"zero Mutex Close", noNew, func() { _ = zero.Close(ctx) }},
		{"zero Mutex Held", noNew, func() { zero.Held() }},
		{"zero Mutex Waiters", noNew, func() { zero.Waiters("x") }},
		{"zero Mutex Name", noNew, func() { zero.Name() }},
		{"zero Mutex Prefix", noNew, func() { zero.Prefix() }},
		{"zero Mutex Driver", noNew, func() { zero.Driver() }},
		{"zero Mutex Features", noNew, func() { zero.Features() }},
		{"zero Mutex Inspect", noNew, func() { _, _, _ = zero.Inspect(ctx, "x") }},
		{"zero Mutex List", noNew, func() { _, _ = zero.List(ctx) }},
		{"zero Mutex ForceRelease", noNew, func() { _, _ = zero.ForceRelease(ctx, "x") }},
		{"zero Mutex ForceReleaseHolder", noNew, func() { _, _ = zero.ForceReleaseHolder(ctx, component.LockStatus{}) }},
		{"nil Mutex Acquire", noNew, func() { _, _ = nilMutex.Acquire(ctx, "x") }},
		{"nil Lock Release", nilLock, func() { _, _ = none.Release(ctx) }},
		{"nil Lock Extend", nilLock, func() { _, _ = none.Extend(ctx, component.DefaultTTL) }},
		{"nil Lock Held", nilLock, func() { none.Held() }},
		{"nil Lock Err", nilLock, func() { _ = none.Err() }},
		{"nil Lock Context", nilLock, func() { none.Context() }},
		{"nil Lock Done", nilLock, func() { none.Done() }},
		{"nil Lock Name", nilLock, func() { none.Name() }},
		{"nil Lock Key", nilLock, func() { none.Key() }},
		{"nil Lock Token", nilLock, func() { none.Token() }},
		{"nil Lock Fence", nilLock, func() { none.Fence() }},
		{"nil Lock AcquiredAt", nilLock, func() { none.AcquiredAt() }},
		{"nil Lock Run", nilLock, func() { _ = component.Run(ctx, none, fn) }},
		{"hand-made Lock Release", noLock, func() { _, _ = made.Release(ctx) }},
		{"hand-made Lock Err", noLock, func() { _ = made.Err() }},
		{"nil ctx Acquire", nilCtxMsg, func() { _, _ = m.Acquire(nilCtx, "x") }},
		{"nil ctx TryAcquire", nilCtxMsg, func() { _, _ = m.TryAcquire(nilCtx, "x") }},
		{"nil ctx Do", nilCtxMsg, func() { _ = m.Do(nilCtx, "x", fn) }},
		{"nil ctx Run", nilCtxMsg, func() { _ = component.Run(nilCtx, held, fn) }},
		{"nil ctx Release", nilCtxMsg, func() { _, _ = held.Release(nilCtx) }},
		{"nil ctx Extend", nilCtxMsg, func() { _, _ = held.Extend(nilCtx, component.DefaultTTL) }},
		{"nil ctx Close", nilCtxMsg, func() { _ = m.Close(nilCtx) }},
		{"nil ctx Inspect", nilCtxMsg, func() { _, _, _ = m.Inspect(nilCtx, "held") }},
		{"nil ctx List", nilCtxMsg, func() { _, _ = m.List(nilCtx) }},
		{"nil ctx ForceRelease", nilCtxMsg, func() { _, _ = m.ForceRelease(nilCtx, "held") }},
		{"nil ctx ForceReleaseHolder", nilCtxMsg, func() { _, _ = m.ForceReleaseHolder(nilCtx, component.LockStatus{}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.HasPrefix(s, tc.want) {
					t.Fatalf("panic %v; want one beginning %q", r, tc.want)
				}
			}()
			tc.call()
		})
	}
	if !held.Held() {
		t.Fatal("a panicking call with a nil ctx changed the lock")
	}
}

// TestNilLockPanicAdvice: the panic of a method called on a nil *Lock
// tells what TryAcquire does with a held name: it returns a nil Lock with
// an error wrapping ErrLocked (never a nil error), so the advice is to
// check the error.
func TestNilLockPanicAdvice(t *testing.T) {
	ctx := context.Background()
	m := newMutex(t, component.Options{})
	if _, err := m.Acquire(ctx, "held"); err != nil {
		t.Fatal(err)
	}
	l, err := m.TryAcquire(ctx, "held")
	if l != nil || !errors.Is(err, component.ErrLocked) {
		t.Fatalf("TryAcquire of a held name = %v, %v; want nil and ErrLocked", l, err)
	}
	defer func() {
		s, _ := recover().(string)
		if !strings.Contains(s, "ErrLocked") || strings.Contains(s, "nil error") {
			t.Fatalf("panic %q; want it to name ErrLocked and claim no nil error", s)
		}
	}()
	l.Held()
}

// TestNilFunc: Do with a nil fn acquires nothing and returns ErrNilFunc;
// Run with a nil fn releases the lock it was given.
func TestNilFunc(t *testing.T) {
	ctx := context.Background()
	m := newMutex(t, component.Options{})
	if err := m.Do(ctx, "x", nil); !errors.Is(err, component.ErrNilFunc) {
		t.Fatalf("Do(nil fn) = %v; want ErrNilFunc", err)
	}
	if n := len(m.Held()); n != 0 {
		t.Fatalf("Do(nil fn) left %d locks held", n)
	}
	l, err := m.Acquire(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := component.Run(ctx, l, nil); !errors.Is(err, component.ErrNilFunc) || !errors.Is(l.Err(), component.ErrReleased) {
		t.Fatalf("Run(nil fn) = %v, lock %v; want ErrNilFunc and the lock released", err, l.Err())
	}
}
