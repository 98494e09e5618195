package drivertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/poll"
)

// heldByA returns two components on the store, a lock name, and the lock
// the first holds.
func (s *suite) heldByA(t *testing.T) (context.Context, *component.Mutex, *component.Mutex, string, *component.Lock) {
	t.Helper()
	ctx := ctxT(t)
	a, b := s.mutex(t, nil, component.Options{}), s.mutex(t, nil, component.Options{})
	n := name(t)
	l, err := a.Acquire(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	return ctx, a, b, n, l
}

// componentTests check the component's semantics on the driver.
func (s *suite) componentTests(t *testing.T) {
	t.Run("MutualExclusion", s.testMutualExclusion)
	t.Run("ReleaseOnce", s.testReleaseOnce)
	t.Run("NotReentrant", s.testNotReentrant)
	t.Run("Renewal", s.testRenewal)
	t.Run("Extend", s.testExtend)
	t.Run("LostWhenTaken", s.testLostWhenTaken)
	t.Run("LostWhenStoreStalls", s.testLostWhenStoreStalls)
	t.Run("WakeUp", s.testWakeUp)
	t.Run("FIFO", s.testFIFO)
	t.Run("Timeout", s.testTimeout)
	t.Run("Cancel", s.testCancel)
	t.Run("Do", s.testDo)
	t.Run("HeldOrder", s.testHeldOrder)
	t.Run("Close", s.testClose)
}

func (s *suite) testMutualExclusion(t *testing.T) {
	ctx := ctxT(t)
	ms := []*component.Mutex{s.mutex(t, nil, component.Options{}), s.mutex(t, nil, component.Options{})}
	n := name(t)
	var inside, entries atomic.Int32
	var fences []uint64
	var fmu sync.Mutex
	group(16, func(i int) {
		for range 10 {
			l, err := ms[i%2].Acquire(ctx, n, component.WithTimeout(20*time.Second))
			if err != nil {
				t.Errorf("Acquire: %v", err)
				return
			}
			if inside.Add(1) != 1 {
				t.Errorf("two holders of %q at once", n)
			}
			entries.Add(1)
			fmu.Lock()
			fences = append(fences, l.Fence())
			fmu.Unlock()
			inside.Add(-1)
			if ok, err := l.Release(ctx); !ok || err != nil {
				t.Errorf("Release = %v, %v", ok, err)
			}
		}
	})
	if entries.Load() != 160 {
		t.Fatalf("%d entries; want 160", entries.Load())
	}
	if drivers.FeaturesOf(ms[0].Driver()).Fencing {
		// Holders follow each other, so fences in acquisition order grow;
		// appended under the lock, the slice is in that order.
		if !slices.IsSorted(fences) || len(slices.Compact(slices.Clone(fences))) != len(fences) {
			t.Fatalf("fences not strictly increasing: %v", fences)
		}
	}
}

func (s *suite) testReleaseOnce(t *testing.T) {
	ctx := ctxT(t)
	m := s.mutex(t, nil, component.Options{})
	l, err := m.Acquire(ctx, name(t))
	if err != nil {
		t.Fatal(err)
	}
	if !l.Held() || l.Err() != nil || l.Token() == "" || l.AcquiredAt().IsZero() {
		t.Fatalf("fresh lock: held %v err %v token %q", l.Held(), l.Err(), l.Token())
	}
	if len(l.Token()) < 22 {
		t.Errorf("token %q: want at least 128 bits", l.Token())
	}
	if ok, err := l.Release(ctx); !ok || err != nil {
		t.Fatalf("Release = %v, %v; want true", ok, err)
	}
	if ok, err := l.Release(ctx); ok || err != nil {
		t.Fatalf("second Release = %v, %v; want false", ok, err)
	}
	if l.Held() || !errors.Is(l.Err(), component.ErrReleased) {
		t.Fatalf("after Release: held %v err %v", l.Held(), l.Err())
	}
	select {
	case <-l.Done():
	default:
		t.Fatal("Done not closed after Release")
	}
	if _, err := m.Acquire(ctx, ""); !errors.Is(err, component.ErrEmptyName) {
		t.Fatalf("empty name: %v; want ErrEmptyName", err)
	}
}

func (s *suite) testNotReentrant(t *testing.T) {
	ctx := ctxT(t)
	m := s.mutex(t, nil, component.Options{})
	n := name(t)
	l, err := m.Acquire(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if _, err := m.Acquire(ctx, n, component.WithTimeout(100*time.Millisecond)); !errors.Is(err, component.ErrTimeout) {
		t.Fatalf("re-acquire by the holder: %v; want ErrTimeout", err)
	}
	if l2, err := m.TryAcquire(ctx, n); !errors.Is(err, component.ErrLocked) {
		t.Fatalf("TryAcquire by the holder = %v, %v; want ErrLocked", l2, err)
	}
}

// renewalTTL is the least ttl of the tests of a lock kept by renewals.
// They are about renewals keeping a lock, not about how short a pause
// loses it (the LostWhen tests are): a renewal is lost only when the
// store, or the test's process, stalls for two thirds of the ttl, and a
// loaded CI host has stalled the -race TLS suite for 400 ms.
const renewalTTL = 2 * time.Second

func (s *suite) testRenewal(t *testing.T) {
	ctx := ctxT(t)
	ttl := max(s.h.TTL, renewalTTL)
	a, b := s.mutex(t, nil, component.Options{TTL: ttl}), s.mutex(t, nil, component.Options{TTL: ttl})
	n := name(t)
	l, err := a.Acquire(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	// One and a half ttls: without renewals the lock would have expired.
	end := time.Now().Add(3 * ttl / 2)
	for time.Now().Before(end) {
		if got, err := b.TryAcquire(ctx, n); !errors.Is(err, component.ErrLocked) {
			t.Fatalf("another component got a renewed lock: %v, %v; want ErrLocked", got, err)
		}
		time.Sleep(ttl / 10)
	}
	if !l.Held() || l.Err() != nil {
		t.Fatalf("renewed lock: held %v, err %v", l.Held(), l.Err())
	}
	if ok, err := l.Release(ctx); !ok || err != nil {
		t.Fatalf("Release = %v, %v", ok, err)
	}
}

func (s *suite) testExtend(t *testing.T) {
	ctx := ctxT(t)
	m := s.mutex(t, nil, component.Options{})
	l, err := m.Acquire(ctx, name(t))
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := l.Extend(ctx, 2*s.h.TTL); !ok || err != nil {
		t.Fatalf("Extend = %v, %v", ok, err)
	}
	if _, err := l.Extend(ctx, time.Microsecond); !errors.Is(err, component.ErrInvalidOption) {
		t.Fatalf("Extend to 1µs: %v; want ErrInvalidOption", err)
	}
	l.Release(ctx)
	if ok, err := l.Extend(ctx, s.h.TTL); ok || err != nil {
		t.Fatalf("Extend after Release = %v, %v; want false", ok, err)
	}
}

func (s *suite) testFIFO(t *testing.T) {
	ctx := ctxT(t)
	m := s.mutex(t, nil, component.Options{})
	n := name(t)
	first, err := m.Acquire(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Go(func() {
			l, err := m.Acquire(ctx, n, component.WithTimeout(20*time.Second))
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			l.Release(ctx)
		})
		waitFor(t, 5*time.Second, fmt.Sprintf("waiter %d to queue", i), func() bool { return m.Waiters(n) == i+1 })
	}
	if l, err := m.TryAcquire(ctx, n); !errors.Is(err, component.ErrLocked) {
		t.Fatalf("TryAcquire jumped the queue: %v, %v; want ErrLocked", l, err)
	}
	// The holder releases and asks again: it queues behind the others.
	first.Release(ctx)
	again, err := m.Acquire(ctx, n, component.WithTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	order = append(order, 5)
	mu.Unlock()
	again.Release(ctx)
	wg.Wait()
	if !slices.Equal(order, []int{0, 1, 2, 3, 4, 5}) {
		t.Fatalf("served in order %v; want arrival order", order)
	}
}

func (s *suite) testTimeout(t *testing.T) {
	ctx, _, b, n, l := s.heldByA(t)
	defer l.Release(ctx)
	for _, timeout := range []time.Duration{component.NoWait, 300 * time.Millisecond} {
		start := time.Now()
		_, err := b.Acquire(ctx, n, component.WithTimeout(timeout))
		e := time.Since(start)
		if !errors.Is(err, component.ErrTimeout) {
			t.Fatalf("timeout %v: %v; want ErrTimeout", timeout, err)
		}
		if e < timeout || e > timeout+time.Second {
			t.Fatalf("timeout %v ended after %v", timeout, e)
		}
	}
	if got, err := b.TryAcquire(ctx, n); !errors.Is(err, component.ErrLocked) {
		t.Fatalf("TryAcquire of a held lock = %v, %v; want ErrLocked", got, err)
	}
}

func (s *suite) testCancel(t *testing.T) {
	ctx, _, b, n, l := s.heldByA(t)
	defer l.Release(ctx)
	why := errors.New("client went away")
	cctx, cancel := context.WithCancelCause(ctx)
	go func() {
		poll.Until(time.Minute, poll.Every, func() bool { return b.Waiters(n) > 0 })
		cancel(why)
	}()
	start := time.Now()
	_, err := b.Acquire(cctx, n, component.WithTimeout(component.Forever))
	if !errors.Is(err, why) {
		t.Fatalf("cancelled wait: %v; want the ctx's cause", err)
	}
	if e := time.Since(start); e > 2*time.Second {
		t.Fatalf("cancelled wait ended after %v", e)
	}
	if b.Waiters(n) != 0 {
		t.Fatalf("%d waiters left", b.Waiters(n))
	}
}

func (s *suite) testDo(t *testing.T) {
	ctx := ctxT(t)
	m := s.mutex(t, nil, component.Options{})
	n := name(t)
	boom := errors.New("boom")
	var seen *component.Lock
	err := m.Do(ctx, n, func(ctx context.Context, l *component.Lock) error {
		if component.LockFrom(ctx) != l || !l.Held() {
			t.Errorf("fn's ctx does not carry its held lock")
		}
		seen = l
		return boom
	})
	if !errors.Is(err, boom) || seen == nil || seen.Held() {
		t.Fatalf("Do = %v; lock held after: %v", err, seen != nil && seen.Held())
	}
	func() {
		defer func() {
			if r := recover(); r != "panic in fn" {
				t.Errorf("recovered %v; want the fn's panic", r)
			}
		}()
		m.Do(ctx, n, func(ctx context.Context, l *component.Lock) error {
			seen = l
			panic("panic in fn")
		})
	}()
	if seen.Held() {
		t.Fatal("lock held after fn panicked")
	}
	if l, err := m.TryAcquire(ctx, n); l == nil || err != nil {
		t.Fatalf("lock not free after Do: %v, %v", l, err)
	} else {
		l.Release(ctx)
	}
}

func (s *suite) testHeldOrder(t *testing.T) {
	ctx := ctxT(t)
	m := s.mutex(t, nil, component.Options{})
	var want []string
	for range 5 {
		n := name(t)
		if _, err := m.Acquire(ctx, n); err != nil {
			t.Fatal(err)
		}
		want = append(want, n)
	}
	var got []string
	for _, l := range m.Held() {
		got = append(got, l.Name())
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Held() = %v; want acquisition order %v", got, want)
	}
	m.Held()[2].Release(ctx)
	if len(m.Held()) != 4 {
		t.Fatalf("Held() after a release has %d locks", len(m.Held()))
	}
}

func (s *suite) testClose(t *testing.T) {
	ctx := ctxT(t)
	a := s.mutex(t, nil, component.Options{})
	b := s.mutex(t, nil, component.Options{})
	n1, n2 := name(t), name(t)
	l1, err := a.Acquire(ctx, n1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Acquire(ctx, n2); err != nil {
		t.Fatal(err)
	}
	waitErr := make(chan error, 1)
	go func() {
		_, err := a.Acquire(ctx, n1, component.WithTimeout(component.Forever))
		waitErr <- err
	}()
	waitFor(t, 5*time.Second, "the waiter to queue", func() bool { return a.Waiters(n1) == 1 })
	if err := a.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-waitErr; !errors.Is(err, component.ErrClosed) {
		t.Fatalf("waiter during Close: %v; want ErrClosed", err)
	}
	if !errors.Is(l1.Err(), component.ErrClosed) || l1.Held() {
		t.Fatalf("lock after Close: held %v err %v", l1.Held(), l1.Err())
	}
	for _, n := range []string{n1, n2} {
		l, err := b.TryAcquire(ctx, n)
		if l == nil || err != nil {
			t.Fatalf("lock %q not released by Close: %v, %v", n, l, err)
		}
		l.Release(ctx)
	}
	if _, err := a.Acquire(ctx, n1); !errors.Is(err, component.ErrClosed) {
		t.Fatalf("Acquire after Close: %v; want ErrClosed", err)
	}
	if err := a.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
