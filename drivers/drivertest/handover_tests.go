package drivertest

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
)

// handoverTests check drivers.Handoverer, when the driver implements it:
// directly, and through a component whose waiter is handed the lock its
// holder releases.
func (s *suite) handoverTests(t *testing.T) {
	if _, ok := s.driver(t).(drivers.Handoverer); !ok {
		return // nothing to check: the component releases and acquires
	}
	t.Run("HandoverContract", s.testHandoverContract)
	t.Run("HandoverToWaiter", s.testHandoverToWaiter)
	t.Run("HandoverGivingUp", s.testHandoverGivingUp)
}

func (s *suite) testHandoverContract(t *testing.T) {
	ctx := ctxT(t)
	d := s.driver(t)
	h := d.(drivers.Handoverer)
	key, ta, tb, tc := "drivertest:"+name(t), token(), token(), token()
	next := func(tok string) drivers.AcquireRequest {
		return drivers.AcquireRequest{Key: key, Token: tok, TTL: 10 * time.Second}
	}

	if released, res, err := h.Handover(ctx, key, ta, next(tb)); err != nil || released || res.Acquired {
		t.Fatalf("Handover of a free lock = %v, %+v, %v; want nothing", released, res, err)
	}
	first, err := d.Acquire(ctx, next(ta))
	if err != nil || !first.Acquired {
		t.Fatalf("Acquire = %+v, %v", first, err)
	}
	if released, res, err := h.Handover(ctx, key, tc, next(tb)); err != nil || released || res.Acquired {
		t.Fatalf("Handover with a stranger's token = %v, %+v, %v; want nothing", released, res, err)
	}
	released, res, err := h.Handover(ctx, key, ta, next(tb))
	if err != nil || !released {
		t.Fatalf("holder's Handover = %v, %+v, %v; want released", released, res, err)
	}
	if ok, err := d.Release(ctx, key, ta); err != nil || ok {
		t.Errorf("Release by the old token after Handover = %v, %v; want false", ok, err)
	}
	if !res.Acquired {
		// the driver released instead (allowed: see Handoverer): free now
		got, err := d.Acquire(ctx, next(tc))
		if err != nil || !got.Acquired {
			t.Fatalf("Acquire after a Handover that released = %+v, %v; want acquired", got, err)
		}
		_, _ = d.Release(ctx, key, tc)
		return
	}
	if drivers.FeaturesOf(d).Fencing && res.Fence <= first.Fence {
		t.Errorf("fence after Handover = %d; want > %d", res.Fence, first.Fence)
	}
	if got, err := d.Acquire(ctx, next(tc)); err != nil || got.Acquired {
		t.Fatalf("Acquire of a handed lock = %+v, %v; want held by the new token", got, err)
	}
	if in, ok := d.(drivers.Inspector); ok {
		info, held, err := in.Inspect(ctx, key)
		if err != nil || !held || info.Token != tb {
			t.Errorf("Inspect after Handover = %+v, %v, %v; want held by %s", info, held, err, tb)
		}
	}
	if ok, err := d.Extend(ctx, key, tb, 10*time.Second); err != nil || !ok {
		t.Errorf("new holder's Extend = %v, %v; want true", ok, err)
	}
	if ok, err := d.Release(ctx, key, tb); err != nil || !ok {
		t.Errorf("new holder's Release = %v, %v; want true", ok, err)
	}
}

// testHandoverToWaiter: a component's waiter gets the lock its holder
// releases, with a greater fence, and keeps it past its ttl (renewed). (A
// handover whose holder had lost the lock first is tested with the
// component: TestHandoverFailureReleases and the drivers' HandoverContract,
// whose stranger's token hands nothing.)
func (s *suite) testHandoverToWaiter(t *testing.T) {
	ctx := ctxT(t)
	ttl := max(s.h.TTL, renewalTTL)
	m := s.mutex(t, nil, component.Options{TTL: ttl})
	n := name(t)
	first, err := m.Acquire(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *component.Lock, 1)
	errs := make(chan error, 1)
	go func() {
		l, err := m.Acquire(ctx, n, component.WithTimeout(10*time.Second))
		if err != nil {
			errs <- err
			return
		}
		got <- l
	}()
	waitFor(t, 5*time.Second, "the second caller waiting", func() bool { return m.Waiters(n) == 1 })
	if ok, err := first.Release(ctx); err != nil || !ok {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	if !errors.Is(first.Err(), component.ErrReleased) {
		t.Errorf("released lock's Err = %v; want ErrReleased", first.Err())
	}
	var second *component.Lock
	select {
	case second = <-got:
	case err := <-errs:
		t.Fatalf("waiting Acquire: %v", err)
	}
	if drivers.FeaturesOf(m.Driver()).Fencing && second.Fence() <= first.Fence() {
		t.Errorf("waiter's fence %d; want > %d", second.Fence(), first.Fence())
	}
	if ok, err := first.Release(ctx); err != nil || ok {
		t.Errorf("second Release of the first lock = %v, %v; want false", ok, err)
	}
	// held past its ttl: the component renews the lock it was handed
	time.Sleep(ttl + ttl/2)
	if !second.Held() {
		t.Fatalf("handed lock not held after %v: %v", ttl+ttl/2, second.Err())
	}
	if ok, err := second.Release(ctx); err != nil || !ok {
		t.Errorf("handed lock's Release = %v, %v; want true", ok, err)
	}
	if l, err := m.TryAcquire(ctx, n); err != nil {
		t.Errorf("TryAcquire after the handed lock's release: %v", err)
	} else {
		_, _ = l.Release(ctx)
	}
}

// testHandoverGivingUp: goroutines of one component take a lock in turn,
// half of them with waits too short to get it, so that waiters give up
// while the lock may be being handed to them. Holders never overlap,
// fences grow, and once everyone is done the lock is free.
func (s *suite) testHandoverGivingUp(t *testing.T) {
	ctx := ctxT(t)
	m := s.mutex(t, nil, component.Options{TTL: s.h.TTL})
	n := name(t)
	var mu sync.Mutex
	var inside atomic.Int32 // holders between Acquire's return and Release
	got, gaveUp := 0, 0
	var last uint64
	group(8, func(i int) {
		for j := range 15 {
			timeout := 10 * time.Second
			if (i+j)%2 == 1 {
				timeout = time.Duration(1+j%3) * time.Millisecond
			}
			l, err := m.Acquire(ctx, n, component.WithTimeout(timeout))
			if errors.Is(err, component.ErrTimeout) {
				mu.Lock()
				gaveUp++
				mu.Unlock()
				continue
			}
			if err != nil {
				t.Errorf("Acquire: %v", err)
				return
			}
			if inside.Add(1) != 1 {
				t.Errorf("two holders of %q at once", n)
			}
			mu.Lock()
			if drivers.FeaturesOf(m.Driver()).Fencing && l.Fence() <= last {
				t.Errorf("fence %d after %d", l.Fence(), last)
			}
			last = l.Fence()
			got++
			mu.Unlock()
			inside.Add(-1) // (the release may hand the lock on at once)
			if ok, err := l.Release(ctx); !ok || err != nil {
				t.Errorf("Release = %v, %v", ok, err)
			}
		}
	})
	if got == 0 || gaveUp == 0 {
		t.Errorf("%d acquisitions, %d gave up; the test needs both", got, gaveUp)
	}
	waitFor(t, 5*time.Second, "the lock free at the end", func() bool {
		l, err := m.TryAcquire(ctx, n)
		if err != nil {
			return false
		}
		_, _ = l.Release(ctx)
		return true
	})
}
