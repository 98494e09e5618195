package fxtest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
)

// WaitBound is how long RequireHeld, RequireNotHeld and RequireFree wait
// for the state they require before failing the test.
const WaitBound = 5 * time.Second

// pollEvery is the pause between two looks at the state.
const pollEvery = 5 * time.Millisecond

// waitFor looks at check until it reports done, for up to WaitBound; it
// returns the last look's account of the state when it never did. check's
// error fails at once. In a testing/synctest bubble the pauses are the
// bubble's fake time.
func waitFor(check func() (done bool, state string, err error)) (string, error) {
	deadline := time.Now().Add(WaitBound)
	for {
		done, state, err := check()
		if done || err != nil {
			return "", err
		}
		if !time.Now().Before(deadline) {
			return state, nil
		}
		time.Sleep(pollEvery)
	}
}

// RequireHeld waits up to WaitBound until m holds the lock name, and
// returns that lock; it fails the test if m does not by then.
func RequireHeld(t testing.TB, m *component.Mutex, name string) *component.Lock {
	t.Helper()
	var l *component.Lock
	state, _ := waitFor(func() (bool, string, error) {
		held := m.Held()
		i := slices.IndexFunc(held, func(l *component.Lock) bool { return l.Name() == name })
		if i >= 0 {
			l = held[i]
		}
		return i >= 0, fmt.Sprint(names(held)), nil
	})
	if l == nil {
		t.Fatalf("lock %q not held by store %q within %v (held: %s)", name, m.Name(), WaitBound, state)
	}
	return l
}

// RequireNotHeld waits up to WaitBound until m does not hold the lock name;
// it fails the test if m still does by then.
func RequireNotHeld(t testing.TB, m *component.Mutex, name string) {
	t.Helper()
	state, _ := waitFor(func() (bool, string, error) {
		held := slices.ContainsFunc(m.Held(), func(l *component.Lock) bool { return l.Name() == name })
		return !held, "held", nil
	})
	if state != "" {
		t.Fatalf("lock %q still held by store %q after %v", name, m.Name(), WaitBound)
	}
}

// RequireFree waits up to WaitBound until the lock name is free in m's
// store (held by nobody, in any component), as its driver's Inspector
// tells; it fails the test if the lock is still held by then, or at once
// when the store cannot be inspected or fails.
func RequireFree(t testing.TB, m *component.Mutex, name string) {
	t.Helper()
	in, ok := m.Driver().(drivers.Inspector)
	if !ok {
		t.Fatalf("fxtest.RequireFree: store %q cannot be inspected", m.Name())
	}
	state, err := waitFor(func() (bool, string, error) {
		_, held, err := in.Inspect(context.Background(), m.Prefix()+name)
		return !held, "held", err
	})
	if err != nil {
		t.Fatalf("fxtest.RequireFree: %v", err)
	}
	if state != "" {
		t.Fatalf("lock %q still held in store %q after %v", name, m.Name(), WaitBound)
	}
}
