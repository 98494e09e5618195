package component_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/memory"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newMutex builds a Mutex closed at the test's end; a nil opts.Driver is a
// new memory store.
func newMutex(t testing.TB, opts component.Options) *component.Mutex {
	t.Helper()
	if opts.Driver == nil {
		opts.Driver = memory.New()
	}
	m, err := component.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m
}

func TestOptionErrors(t *testing.T) {
	cases := []struct {
		opts  component.Options
		field string
	}{
		{component.Options{TTL: -time.Second}, "TTL"},
		{component.Options{TTL: time.Millisecond}, "TTL"},
		{component.Options{TTL: component.MaxTTL + 1}, "TTL"},
		{component.Options{RetryDelay: -1}, "RetryDelay"},
		{component.Options{TTL: time.Second, RetryDelay: -1}, "RetryDelay"},
		{component.Options{TTL: component.Forever}, "TTL"},
		{component.Options{MaxNameLength: -1}, "MaxNameLength"},
		{component.Options{Driver: floored{memory.New()}, TTL: 100 * time.Millisecond}, "TTL"}, // under the driver's floor
		{component.Options{}, "Driver"},                                                        // New only: Validate takes a nil Driver
	}
	for _, c := range cases {
		_, err := component.New(c.opts)
		var oe *component.OptionError
		if !errors.As(err, &oe) || oe.Field != c.field || !errors.Is(err, component.ErrInvalidOption) {
			t.Errorf("New(%+v) = %v; want an OptionError on %s", c.opts, err, c.field)
		}
		verr := c.opts.Validate()
		if c.field == "Driver" {
			if verr != nil {
				t.Errorf("Validate of the zero Options = %v; want nil", verr)
			}
		} else if !errors.As(verr, &oe) || oe.Field != c.field || verr.Error() != err.Error() {
			t.Errorf("Validate(%+v) = %v; want New's error %v", c.opts, verr, err)
		}
	}
	m := newMutex(t, component.Options{})
	for _, ttl := range []time.Duration{time.Microsecond, math.MaxInt64} {
		if _, err := m.Acquire(context.Background(), "x", component.WithTTL(ttl)); !errors.Is(err, component.ErrInvalidOption) {
			t.Fatalf("WithTTL(%v): %v", ttl, err)
		}
	}
	l, err := m.Acquire(context.Background(), "x", component.WithTTL(component.MaxTTL))
	if err != nil {
		t.Fatalf("WithTTL(MaxTTL): %v", err)
	}
	if _, err := l.Extend(context.Background(), math.MaxInt64); !errors.Is(err, component.ErrInvalidOption) {
		t.Fatalf("Extend(MaxInt64): %v", err)
	}
	l.Release(context.Background())
	if _, err := m.TryAcquire(context.Background(), ""); !errors.Is(err, component.ErrEmptyName) {
		t.Fatalf("TryAcquire(\"\"): %v", err)
	}
}

// TestSlowStoreGrace: one attempt is given a second to answer even when the
// timeout is shorter (zero included).
func TestSlowStoreGrace(t *testing.T) {
	f := newFaulty()
	f.set(func(f *faulty) { f.delay = 300 * time.Millisecond })
	m := newMutex(t, component.Options{Driver: f})
	ctx := context.Background()
	l, err := m.Acquire(ctx, "slow", component.WithTimeout(component.NoWait))
	if err != nil {
		t.Fatalf("a 300 ms store with timeout 0: %v", err)
	}
	l.Release(ctx)
	if l, err := m.TryAcquire(ctx, "slow"); l == nil || err != nil {
		t.Fatalf("TryAcquire on a 300 ms store: %v, %v", l, err)
	}
}

// TestHungStore: a store that does not answer ends the wait after the grace
// second with ErrTimeout (and ErrDriver), and a lock it grants too late is
// released.
func TestHungStore(t *testing.T) {
	component.Unpooled(t)
	synctest.Test(t, func(t *testing.T) {
		f := newFaulty()
		f.set(func(f *faulty) { f.delay, f.ignoreCtx = 1500*time.Millisecond, true })
		m := newMutex(t, component.Options{Driver: f})
		ctx := context.Background()
		start := time.Now()
		_, err := m.Acquire(ctx, "hung", component.WithTimeout(100*time.Millisecond))
		e := time.Since(start)
		if !errors.Is(err, component.ErrTimeout) {
			t.Fatalf("hung store: %v; want ErrTimeout", err)
		}
		// the bubble's clock: exactly when the store answered
		if e != 1500*time.Millisecond {
			t.Fatalf("hung store answered after %v (a store ignoring its ctx answers at 1.5 s)", e)
		}
		// The late grant was released: the lock is free in the store.
		synctest.Wait()
		if _, held, _ := f.Inspect(ctx, "mutex:hung"); held || f.releases.Load() < 1 {
			t.Fatalf("the late lock was not released (held %v, releases %d)", held, f.releases.Load())
		}
	})
}

// deadlineSeen records the deadline and the error of the ctx of each
// Acquire call, as a hung store sees them when its ctx ends.
type deadlineSeen struct {
	*faulty
	mu       sync.Mutex
	deadline time.Time
	err      error
}

func (d *deadlineSeen) Acquire(ctx context.Context, req drivers.AcquireRequest) (drivers.AcquireResult, error) {
	res, err := d.faulty.Acquire(ctx, req)
	d.mu.Lock()
	d.deadline, _ = ctx.Deadline()
	d.err = ctx.Err()
	d.mu.Unlock()
	return res, err
}

// hungStore runs f in a synctest bubble with a Mutex on a store that
// never answers and records the deadline and error its Acquire's ctx had.
func hungStore(t *testing.T, f func(t *testing.T, d *deadlineSeen, m *component.Mutex)) {
	component.Unpooled(t)
	synctest.Test(t, func(t *testing.T) {
		store := newFaulty()
		store.set(func(f *faulty) { f.delay = time.Hour })
		d := &deadlineSeen{faulty: store}
		f(t, d, newMutex(t, component.Options{Driver: d}))
	})
}

// TestHungStoreEndsAtLimit: a store that waits on its ctx and never
// answers is cut off when the attempt's grace second is up, with the
// deadline it was given and context.DeadlineExceeded, as
// context.WithDeadline would; the wait ends with ErrTimeout.
func TestHungStoreEndsAtLimit(t *testing.T) {
	hungStore(t, func(t *testing.T, d *deadlineSeen, m *component.Mutex) {
		start := time.Now()
		_, err := m.Acquire(context.Background(), "hung", component.WithTimeout(100*time.Millisecond))
		if !errors.Is(err, component.ErrTimeout) || !errors.Is(err, component.ErrDriver) {
			t.Fatalf("hung store: %v; want ErrTimeout and ErrDriver", err)
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		if e := time.Since(start); e != time.Second {
			t.Fatalf("the attempt ended after %v; want its grace, 1s", e)
		}
		if !d.deadline.Equal(start.Add(time.Second)) || d.err != context.DeadlineExceeded {
			t.Fatalf("the store saw deadline %v, error %v; want %v, context.DeadlineExceeded", d.deadline, d.err, start.Add(time.Second))
		}
	})
}

// TestCallerDeadlineCause: a caller's ctx cancelled with a cause that
// wraps DeadlineExceeded reads Canceled in the store's ctx, as in the
// caller's; only the attempt's own limit reads DeadlineExceeded.
func TestCallerDeadlineCause(t *testing.T) {
	hungStore(t, func(t *testing.T, d *deadlineSeen, m *component.Mutex) {
		ctx, cancel := context.WithCancelCause(context.Background())
		why := fmt.Errorf("upstream: %w", context.DeadlineExceeded)
		time.AfterFunc(100*time.Millisecond, func() { cancel(why) })
		if _, err := m.TryAcquire(ctx, "x"); !errors.Is(err, why) {
			t.Fatalf("TryAcquire = %v; want the caller's cause", err)
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.err != context.Canceled {
			t.Fatalf("the store saw %v; want context.Canceled", d.err)
		}
	})
}

func TestCancelDuringAttempt(t *testing.T) {
	f := newFaulty()
	f.set(func(f *faulty) { f.delay = time.Hour })
	m := newMutex(t, component.Options{Driver: f})
	why := errors.New("shutting down")
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(50*time.Millisecond, func() { cancel(why) })
	start := time.Now()
	if _, err := m.Acquire(ctx, "x"); !errors.Is(err, why) || time.Since(start) > time.Second {
		t.Fatalf("Acquire cancelled mid-attempt = %v after %v; want the cause at once", err, time.Since(start))
	}
	// Already cancelled: no attempt at all.
	n := f.acquires.Load()
	if _, err := m.Acquire(ctx, "x"); !errors.Is(err, why) || f.acquires.Load() != n {
		t.Fatalf("Acquire with a dead ctx = %v, %d attempts", err, f.acquires.Load()-n)
	}
}

// TestBackoff: without wake-ups a waiter polls after retryDelay, doubling.
func TestBackoff(t *testing.T) {
	f := newFaulty()
	holder := newMutex(t, component.Options{Driver: f})
	waiter := newMutex(t, component.Options{Driver: f, RetryDelay: 50 * time.Millisecond})
	ctx := context.Background()
	if _, err := holder.Acquire(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	before := f.acquires.Load()
	if _, err := waiter.Acquire(ctx, "x", component.WithTimeout(1600*time.Millisecond)); !errors.Is(err, component.ErrTimeout) {
		t.Fatal(err)
	}
	// Delays drawn in [d/2, d] for d = 50, 100, 200, 400, 800, 1000 ms:
	// between 5 and 11 attempts fit in 1.6 s.
	if n := f.acquires.Load() - before; n < 5 || n > 11 {
		t.Fatalf("%d attempts in 1.6 s; want 5-11 with a doubling backoff from 50 ms", n)
	}
}

// TestHolderTTLBoundsWait: a waiter polls again when the holder's ttl ends,
// even when its backoff is longer.
func TestHolderTTLBoundsWait(t *testing.T) {
	f := newFaulty()
	ctx := context.Background()
	// A holder that crashed: its lock expires in 200 ms, nobody renews it.
	if res, _ := f.Driver.Acquire(ctx, drivers.AcquireRequest{Key: "mutex:x", Token: "dead", TTL: 200 * time.Millisecond}); !res.Acquired {
		t.Fatal("setup")
	}
	waiter := newMutex(t, component.Options{Driver: f, RetryDelay: 4 * time.Second})
	start := time.Now()
	l, err := waiter.Acquire(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if e := time.Since(start); e > time.Second {
		t.Fatalf("acquired %v after the start; the holder's ttl was 200 ms", e)
	}
	l.Release(ctx)
}

// TestRenewalRetriesThenRecovers: renewals failing from 200 ms until 300 ms
// (about 200, 215, 250, 310 ms: the retry delay doubles, with jitter) are
// retried, and one that succeeds before the 600 ms expiry keeps the lock,
// well past that expiry. In a synctest bubble: the test follows the renewal
// calls (faulty.renewed) on the bubble's clock.
func TestRenewalRetriesThenRecovers(t *testing.T) {
	component.Unpooled(t)
	synctest.Test(t, func(t *testing.T) {
		f := newFaulty()
		f.renewed = make(chan error, 100)
		m := newMutex(t, component.Options{Driver: f, TTL: 600 * time.Millisecond, RetryDelay: 10 * time.Millisecond})
		ctx := context.Background()
		start := time.Now()
		l, err := m.Acquire(ctx, "x")
		if err != nil {
			t.Fatal(err)
		}
		f.set(func(f *faulty) { f.renewErr = errors.New("connection refused") })
		failed := 0
		for time.Since(start) < 300*time.Millisecond { // the failing renewal and its retries
			if err := <-f.renewed; err == nil {
				t.Fatal("a renewal succeeded while the store fails them")
			}
			failed++
		}
		if failed < 3 {
			t.Fatalf("%d failing renewals by %v; want at least 3 (the first, retried)", failed, time.Since(start))
		}
		f.set(func(f *faulty) { f.renewErr = nil })
		// past the expiry of the last successful renewal (the acquisition)
		for ok := 0; ok == 0 || time.Since(start) < 1300*time.Millisecond; {
			select {
			case err := <-f.renewed:
				if err != nil {
					t.Fatalf("a renewal failed after the store came back: %v", err)
				}
				ok++
			case <-l.Done():
				t.Fatalf("lock lost although the store came back before its expiry: %v", l.Err())
			}
		}
		if !l.Held() || l.Err() != nil {
			t.Fatalf("lock lost although the store came back before its expiry: %v", l.Err())
		}
	})
}

// TestRenewalFailingUntilExpiryLoses: renewals failing from the start lose
// the lock before its ttl, and the lock the store still held is released.
func TestRenewalFailingUntilExpiryLoses(t *testing.T) {
	component.Unpooled(t)
	synctest.Test(t, func(t *testing.T) {
		f := newFaulty()
		m := newMutex(t, component.Options{Driver: f, TTL: 300 * time.Millisecond, RetryDelay: 10 * time.Millisecond})
		l, err := m.Acquire(context.Background(), "x")
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		f.set(func(f *faulty) { f.renewErr = errors.New("connection refused") })
		<-l.Done()
		if e := time.Since(start); e > 300*time.Millisecond || !errors.Is(l.Err(), component.ErrLost) {
			t.Fatalf("lost after %v with %v; want ErrLost within the ttl", e, l.Err())
		}
		// The store only failed renewals: the lock it still held for us is
		// released, best effort, so that others need not wait for its
		// expiry (before it: the store would drop it itself then).
		synctest.Wait()
		if _, held, _ := f.Inspect(context.Background(), l.Key()); f.releases.Load() != 1 || held {
			t.Fatalf("releases %d, held in the store %v; want the lost lock released once", f.releases.Load(), held)
		}
	})
}

// TestRenewalBatches: a hundred locks are renewed in a few batches per
// period, not one call each.
func TestRenewalBatches(t *testing.T) {
	component.Unpooled(t)
	synctest.Test(t, func(t *testing.T) {
		f := newFaulty()
		f.renewed = make(chan error, 100)
		ttl := 300 * time.Millisecond
		m := newMutex(t, component.Options{Driver: f, TTL: ttl})
		ctx := context.Background()
		for i := range 100 {
			if _, err := m.Acquire(ctx, "lock-"+strings.Repeat("x", i)); err != nil {
				t.Fatal(err)
			}
		}
		f.renews.Store(0)
		f.renewLeases.Store(0)
		// nine renewal periods of ttl/3: up to the call at 3 ttl, each
		// call in the bubble's clock; a lock ending would end the wait
		start, first := time.Now(), m.Held()[0]
		for time.Since(start) < 3*ttl {
			select {
			case <-f.renewed:
			case <-first.Done():
				t.Fatalf("%q lost %v after the start: %v", first.Name(), time.Since(start), first.Err())
			}
		}
		synctest.Wait()
		calls, leases := f.renews.Load(), f.renewLeases.Load()
		if e := time.Since(start); calls > 12 || leases < 700 || e != 3*ttl {
			t.Fatalf("%d Renew calls for %d leases in 9 periods, the last %v after the start; want ≤ 12 calls renewing each lock every period, one at %v",
				calls, leases, e, 3*ttl)
		}
		for _, l := range m.Held() {
			if !l.Held() {
				t.Fatalf("%q not held", l.Name())
			}
		}
	})
}

func TestDoCancelledWhenLost(t *testing.T) {
	store := memory.New()
	m := newMutex(t, component.Options{Driver: store})
	err := m.Do(context.Background(), "x", func(ctx context.Context, l *component.Lock) error {
		store.Revoke(l.Key())
		<-ctx.Done()
		return context.Cause(ctx)
	})
	if !errors.Is(err, component.ErrLost) {
		t.Fatalf("Do's fn ctx ended with %v; want ErrLost", err)
	}
}

// TestLostEventOfAnotherPrefixIgnored: a loss event for a key outside the
// Mutex's prefix does not touch its lock of the same name.
func TestLostEventOfAnotherPrefixIgnored(t *testing.T) {
	store := memory.New()
	a := newMutex(t, component.Options{Driver: store})
	ctx := context.Background()
	l, err := a.Acquire(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	// Another holder's lock of the same name in another prefix is revoked.
	b := newMutex(t, component.Options{Driver: store, Prefix: "other:"})
	lb, err := b.Acquire(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	store.Revoke(lb.Key())
	<-lb.Done()
	if !l.Held() {
		t.Fatal("a lock lost by another prefix's revocation")
	}
}

func TestCloseBoundedByCtx(t *testing.T) {
	f := newFaulty()
	m, err := component.New(component.Options{Driver: &hangingRelease{faulty: f}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Acquire(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	m.Close(ctx)
	if e := time.Since(start); e > time.Second {
		t.Fatalf("Close took %v with a 100 ms ctx and a hanging store", e)
	}
}

type hangingRelease struct{ *faulty }

func (h *hangingRelease) Release(ctx context.Context, _, _ string) (bool, error) {
	<-ctx.Done()
	return false, ctx.Err()
}

func TestDriverErrorNamesStore(t *testing.T) {
	m := newMutex(t, component.Options{Driver: brokenDriver{}, Name: "orders"})
	_, err := m.Acquire(context.Background(), "order:1")
	var de *component.DriverError
	if !errors.As(err, &de) || !errors.Is(err, component.ErrDriver) || de.Store != "orders" || de.Op != "acquire" {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(err.Error(), `store "orders": acquire "order:1": connection refused`) {
		t.Fatalf("message %q", err)
	}
}

type brokenDriver struct{}

func (brokenDriver) Acquire(context.Context, drivers.AcquireRequest) (drivers.AcquireResult, error) {
	return drivers.AcquireResult{}, errors.New("connection refused")
}
func (brokenDriver) Release(context.Context, string, string) (bool, error) { return false, nil }
func (brokenDriver) Extend(context.Context, string, string, time.Duration) (bool, error) {
	return false, nil
}
func (brokenDriver) Close(context.Context) error { return nil }

// TestRoundRobin: goroutines asking again right after their release are
// served in turn (no barging). In a synctest bubble, each holder keeps the
// lock until every other goroutine is queued behind it or done
// (synctest.Wait, called only by the holder, so by one goroutine at a time).
func TestRoundRobin(t *testing.T) {
	component.Unpooled(t)
	synctest.Test(t, func(t *testing.T) {
		m := newMutex(t, component.Options{})
		ctx := context.Background()
		var mu sync.Mutex
		var order []int
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				for range 25 {
					l, err := m.Acquire(ctx, "x")
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					order = append(order, g)
					mu.Unlock()
					synctest.Wait() // the others queue up while the lock is held
					l.Release(ctx)
				}
			})
		}
		wg.Wait()
		// Once all four are queued, the order is a rotation.
		tail := order[8:92]
		for i := 4; i < len(tail); i++ {
			if tail[i] != tail[i-4] {
				t.Fatalf("not served in turn: %v", order)
			}
		}
	})
}

// waitUntil polls cond (testutil.Poll) for the Mutex's states that send no
// signal, failing the test after 5 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.Poll(t, 5*time.Second, what, cond)
}
