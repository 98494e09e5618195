// Package drivertest is the conformance suite every mutexfx driver passes
// unchanged: call Run from a driver's tests with a Harness that opens driver
// instances on the store under test.
//
// It checks the driver contract directly (tokens, idempotent release,
// expiry, fencing, extend, names as opaque data) and the component's
// semantics through the driver (mutual exclusion under many goroutines and
// two components, renewal, loss by theft and by a store that stops
// answering, wake-ups, FIFO, timeouts, cancellation, Do, close).
package drivertest

import (
	"context"
	"crypto/rand"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/poll"
)

// Harness opens drivers on the store under test.
type Harness struct {
	// New returns a new driver instance on the store under test. Instances
	// from one Harness share the store: their locks exclude each other. The
	// suite closes every driver it gets.
	New func(t testing.TB) drivers.Driver

	// TTL is the lock ttl of the tests of expiry, renewal and loss.
	// Default: 600 ms.
	TTL time.Duration
}

// Run runs the conformance suite.
func Run(t *testing.T, h Harness) {
	if h.TTL == 0 {
		h.TTL = 600 * time.Millisecond
	}
	s := &suite{h: h}
	t.Run("Driver", s.driverTests)
	t.Run("Component", s.componentTests)
	t.Run("Handover", s.handoverTests)
}

type suite struct {
	h Harness
}

// driver opens a driver closed at the end of the test.
func (s *suite) driver(t *testing.T) drivers.Driver {
	t.Helper()
	d := s.h.New(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := d.Close(ctx); err != nil {
			t.Errorf("driver Close: %v", err)
		}
	})
	return d
}

// mutex builds a component on a new driver instance (or on d when given),
// closed at the end of the test.
func (s *suite) mutex(t *testing.T, d drivers.Driver, opts component.Options) *component.Mutex {
	t.Helper()
	if d == nil {
		d = s.h.New(t)
	}
	opts.Driver = d
	if opts.Logger == nil {
		// A failing test shows the component's warnings (failed
		// renewals, losses) with its output.
		opts.Logger = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	}
	if opts.Prefix == "" {
		opts.Prefix = "drivertest:"
	}
	if opts.TTL == 0 {
		opts.TTL = s.h.TTL
	}
	if opts.RetryDelay == 0 {
		opts.RetryDelay = 10 * time.Millisecond
	}
	m, err := component.New(opts)
	if err != nil {
		t.Fatalf("component.New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("Mutex Close: %v", err)
		}
	})
	return m
}

// name returns a lock name unique to this run.
func name(t *testing.T) string {
	return t.Name() + "/" + rand.Text()[:10]
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitFor checks cond every few milliseconds until it holds (poll.Until),
// and fails the test naming what after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if !poll.Until(d, poll.Every, cond) {
		t.Fatalf("timed out after %v waiting for %s", d, what)
	}
}

// token returns a random holder token.
func token() string { return rand.Text() }

// group runs fns concurrently and waits for them.
func group(n int, fn func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { fn(i) })
	}
	wg.Wait()
}
