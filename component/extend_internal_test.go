package component

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/memory"
)

// lateExtend is the memory store as a network store (remote), whose
// Extend fails at once (its reply is lost) while its request is still on
// its way: it reaches the store when the test lands it, after requests
// sent later (another connection's) were applied. With pass, Extend works;
// with lateRenew, Renew fails in the same way. Each renewal call is told
// on renewed.
type lateExtend struct {
	*remote
	mu        sync.Mutex
	land      func() // applies the last failed Extend or Renew in the store
	pass      bool
	lateRenew bool
	renewed   chan renewal // a call finding it full does not wait
}

// renewal is a renewal call of lateExtend: when it ended, the ttl it
// asked for and its error.
type renewal struct {
	at  time.Time
	ttl time.Duration
	err error
}

func (d *lateExtend) Extend(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pass {
		return d.Driver.Extend(ctx, key, token, ttl)
	}
	d.land = func() { _, _ = d.Driver.Extend(context.Background(), key, token, ttl) }
	return false, errors.New("connection reset")
}

func (d *lateExtend) Renew(ctx context.Context, leases []drivers.Lease) []drivers.RenewResult {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []drivers.RenewResult
	if !d.lateRenew {
		out = d.remote.Renew(ctx, leases)
	} else {
		d.land = func() { d.Driver.Renew(context.Background(), leases) }
		out = drivers.RenewFailed(len(leases), errors.New("connection reset"))
	}
	select {
	case d.renewed <- renewal{at: time.Now(), ttl: leases[0].TTL, err: out[0].Err}:
	default:
	}
	return out
}

// set changes d's behaviour under its lock.
func (d *lateExtend) set(f func(d *lateExtend)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f(d)
}

// lateStore makes, in a synctest bubble, the store d and two Mutexes of
// ttl on it, the first holding "a" as l.
func lateStore(t *testing.T, ttl time.Duration) (d *lateExtend, l *Lock, other *Mutex) {
	d = &lateExtend{remote: &remote{Driver: memory.New()}, renewed: make(chan renewal, 100)}
	m := newOn(t, d, ttl)
	other = newOn(t, d, ttl)
	l, err := m.Acquire(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	return d, l, other
}

// failExtend makes an Extend of l to 300 ms fail, its request left to
// land, and waits for the renewal the failure sends at once.
func failExtend(t *testing.T, l *Lock) {
	if _, err := l.Extend(context.Background(), 300*time.Millisecond); err == nil {
		t.Fatal("Extend: no error")
	}
	synctest.Wait()
}

// freedAfterLoss tries other's TryAcquire of "a" every 10 ms for 1 s
// after a late request landed, fails the test if it gets the lock while l
// still believes it holds it, and reports whether it got it.
func freedAfterLoss(t *testing.T, l *Lock, other *Mutex) bool {
	landed := time.Now()
	for range 100 {
		time.Sleep(10 * time.Millisecond)
		if _, err := other.TryAcquire(context.Background(), "a"); err == nil {
			if l.Err() == nil {
				t.Fatalf("another holder got the lock %v after the late request landed; the first still believes it holds it", time.Since(landed))
			}
			return true
		}
	}
	return false
}

// TestFailedExtendLandsLate: a failed Extend to a shorter ttl may still
// reach the store after the renewal that follows it. The store then keeps
// the lock for the shorter ttl only: the holder must not believe it holds
// the lock after the store could have given it to another. (Before: the
// renewal after the failure renewed with the longer ttl, and the holder
// kept its lock 3 s while the store freed it after 300 ms.)
func TestFailedExtendLandsLate(t *testing.T) {
	Unpooled(t)
	synctest.Test(t, func(t *testing.T) {
		d, l, other := lateStore(t, 3*time.Second)
		failExtend(t, l)
		d.set(func(d *lateExtend) { d.land() })
		freedAfterLoss(t, l, other)
	})
}

// TestFailedExtendLandsAfterLongerExtend: a failed Extend to 300 ms, then
// an Extend to 10 s that succeeds, then the first one's request lands
// (within its call's deadline, a second after it was sent): the store
// keeps the lock 300 ms from then. Until that request can no longer land,
// the lock is renewed every 100 ms, so the store never frees it while the
// holder believes it holds it; then every third of 10 s, with 10 s.
// (Before: renewed only every 3.3 s, and another holder got it 300 ms
// after the request landed while the first still held it.)
func TestFailedExtendLandsAfterLongerExtend(t *testing.T) {
	lateLanding(t, 3*time.Second, 500*time.Millisecond, func(l *Lock, _ *lateExtend) { failExtend(t, l) })
}

// TestFailedRenewalLandsAfterLongerExtend: the same with a renewal to
// 300 ms that failed (the first, sent at once), its request landing after
// an Extend to 10 s succeeded, within the renewal call's deadline (the
// lock's tracked expiry, 287 ms after it was sent).
func TestFailedRenewalLandsAfterLongerExtend(t *testing.T) {
	lateLanding(t, 300*time.Millisecond, 200*time.Millisecond, func(l *Lock, d *lateExtend) {
		d.set(func(d *lateExtend) { d.lateRenew = true })
		for r := range d.renewed {
			if r.err != nil {
				break
			}
		}
		synctest.Wait()
		d.set(func(d *lateExtend) { d.lateRenew = false })
	})
}

// extendTo10s extends l to 10 s through a store that answers again.
func extendTo10s(t *testing.T, d *lateExtend, l *Lock) {
	d.set(func(d *lateExtend) { d.pass = true })
	if ok, err := l.Extend(context.Background(), 10*time.Second); !ok || err != nil {
		t.Fatalf("Extend to 10 s: %v, %v", ok, err)
	}
}

// lateLanding runs a late-landing scenario on a Mutex of ttl: fail leaves
// a failed request to the store (d.land), then an Extend to 10 s succeeds,
// the failed request lands just after the renewal at landAt after the
// acquisition (the worst moment: the store keeps the lock for the landed
// ttl until the next renewal), and the test checks that no other holder
// gets the lock, and that the lock is renewed with 10 s every 3.3 s once
// the failed request can no longer land.
func lateLanding(t *testing.T, ttl, landAt time.Duration, fail func(l *Lock, d *lateExtend)) {
	Unpooled(t)
	synctest.Test(t, func(t *testing.T) {
		d, l, other := lateStore(t, ttl)
		acquired := time.Now()
		fail(l, d)
		extendTo10s(t, d, l)
		for time.Since(acquired) < landAt { // the bubble's clock advances to each renewal
			if r := <-d.renewed; r.err != nil {
				t.Fatalf("a renewal failed: %v", r.err)
			}
		}
		synctest.Wait() // its answer taken in
		if at := time.Since(acquired); at != landAt {
			t.Fatalf("a renewal %v after the acquisition, want one at %v (every 100 ms)", at, landAt)
		}
		d.set(func(d *lateExtend) { d.land() })
		for range 3 {
			if freedAfterLoss(t, l, other) || l.Err() != nil {
				t.Fatalf("lost a lock the store keeps: %v", l.Err())
			}
		}
		spacedRenewals(t, d, l, acquired, acquired.Add(landAt))
	})
}

// spacedRenewals follows l's renewals after a late landing just after
// the renewal at prev: 3 s after the acquisition, the failed request can
// no longer land, so the renewals come every 3.3 s again, with 10 s: the
// store's ttl goes down to 6.7 s between them. It fails the test unless
// two renewals in a row come 3 to 4 s apart by 10 s after the
// acquisition, each renewal with 10 s and at most 4 s after the one
// before it (the store's ttl never below 6 s).
func spacedRenewals(t *testing.T, d *lateExtend, l *Lock, acquired, prev time.Time) {
	for spaced := 0; spaced < 2; {
		var r renewal
		select {
		case r = <-d.renewed: // the bubble's clock advances to each
		case <-l.Done():
			t.Fatalf("lost a lock the store keeps: %v", l.Err())
		}
		if r.err != nil || r.ttl != 10*time.Second || r.at.Sub(acquired) > 10*time.Second {
			t.Fatalf("renewal %v after the acquisition with %v: %v; want two 3.3 s apart, with 10 s, within 10 s",
				r.at.Sub(acquired), r.ttl, r.err)
		}
		gap := r.at.Sub(prev)
		switch {
		case gap > 4*time.Second:
			t.Fatalf("renewals %v apart: the store's ttl went down to %v; want 6 s at least", gap, 10*time.Second-gap)
		case gap >= 3*time.Second:
			spaced++
		default:
			spaced = 0
		}
		prev = r.at
	}
	synctest.Wait()
	if info, held, err := d.Inspect(context.Background(), l.Key()); err != nil || !held || info.TTL != 10*time.Second || l.Err() != nil {
		t.Fatalf("after the last renewal, the store's ttl: %v, held %v, %v (lock: %v); want 10 s", info.TTL, held, err, l.Err())
	}
}

// TestLateLandingBoundsExpiry: after a failed Extend to 300 ms and an
// Extend to 10 s that succeeded, the lock's tracked expiry counts with
// 300 ms while the failed request may land: when it lands and the
// renewals fail from then on, the holder loses the lock before the store
// frees it. (Counted with 10 s, the holder kept it 10 s while the store
// freed it 300 ms after the landing.)
func TestLateLandingBoundsExpiry(t *testing.T) {
	Unpooled(t)
	synctest.Test(t, func(t *testing.T) {
		d, l, other := lateStore(t, 3*time.Second)
		failExtend(t, l)
		extendTo10s(t, d, l)
		d.set(func(d *lateExtend) { d.land(); d.lateRenew = true })
		if !freedAfterLoss(t, l, other) {
			t.Fatal("the store kept the lock 1 s after a 300 ms Extend landed, no renewal confirmed")
		}
	})
}
