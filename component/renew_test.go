package component_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/memory"
)

// hangOnce is a store whose first renewal call hangs until its ctx ends,
// as a call sent on a dead pooled connection does, while the calls after
// it work. It records the keys of the renewals that succeeded after it.
type hangOnce struct {
	entered, ended chan struct{} // the hung call started, returned

	mu      sync.Mutex
	calls   int
	renewed []string
}

// hang hangs the first call; it reports whether it did.
func (h *hangOnce) hang(ctx context.Context) bool {
	h.mu.Lock()
	h.calls++
	first := h.calls == 1
	h.mu.Unlock()
	if !first {
		return false
	}
	close(h.entered)
	<-ctx.Done()
	close(h.ended)
	return true
}

func (h *hangOnce) record(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.renewed = append(h.renewed, key)
}

func (h *hangOnce) renewedAfter(key string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Contains(h.renewed, key)
}

// hangOnceRenewer renews in batches (drivers.Renewer).
type hangOnceRenewer struct {
	*faulty
	*hangOnce
}

func (d *hangOnceRenewer) Renew(ctx context.Context, leases []drivers.Lease) []drivers.RenewResult {
	if d.hang(ctx) {
		out := make([]drivers.RenewResult, len(leases))
		for i := range out {
			out[i].Err = ctx.Err()
		}
		return out
	}
	out := d.faulty.Renew(ctx, leases)
	for i, r := range out {
		if r.Held {
			d.record(leases[i].Key)
		}
	}
	return out
}

// hangOnceExtender has no Renewer: the Mutex renews with one Extend per
// lock.
type hangOnceExtender struct {
	drivers.Driver
	*hangOnce
}

func (d *hangOnceExtender) Extend(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	if d.hang(ctx) {
		return false, ctx.Err()
	}
	ok, err := d.Driver.Extend(ctx, key, token, ttl)
	if ok {
		d.record(key)
	}
	return ok, err
}

// TestHungRenewal (in a synctest bubble: the timings are exact): while
// the renewal call of one lock hangs, a lock acquired meanwhile, whose
// expiry comes before the hung call's lock's, is renewed all the same (it
// is not lost waiting for the hung call); and the hung call, bounded to a
// third of the ttl (at least a second), fails in time for its lock to be
// renewed by a retry before its expiry.
func TestHungRenewal(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(h *hangOnce) drivers.Driver
	}{
		{"Renewer", func(h *hangOnce) drivers.Driver { return &hangOnceRenewer{faulty: newFaulty(), hangOnce: h} }},
		{"Extend", func(h *hangOnce) drivers.Driver { return &hangOnceExtender{Driver: memory.New(), hangOnce: h} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			component.Unpooled(t)
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				h := &hangOnce{entered: make(chan struct{}), ended: make(chan struct{})}
				// a: renewed at 1 s, the call hanging until 2 s (before: until
				// its expiry at about 2.98 s), retried 10-20 ms later.
				m := newMutex(t, component.Options{Driver: tc.store(h), TTL: 3 * time.Second, RetryDelay: 10 * time.Millisecond})
				a, err := m.Acquire(ctx, "a")
				if err != nil {
					t.Fatal(err)
				}
				<-h.entered
				// b expires 138 ms after it is taken unless renewed (every 50 ms).
				b, err := m.Acquire(ctx, "b", component.WithTTL(150*time.Millisecond))
				if err != nil {
					t.Fatal(err)
				}
				<-h.ended
				if !b.Held() {
					t.Fatalf("b, taken during a's hung renewal, was lost: %v", b.Err())
				}
				waitUntil(t, "a renewed by a retry", func() bool { return h.renewedAfter(a.Key()) || a.Err() != nil })
				if !a.Held() || !b.Held() {
					t.Fatalf("a: %v, b: %v; want both held", a.Err(), b.Err())
				}
			})
		})
	}
}

// slowRenewer answers every renewal call after delay (or when its ctx
// ends), as a loaded but working store does, and counts the calls that
// renewed something.
type slowRenewer struct {
	*faulty
	delay   time.Duration
	renewed atomic.Int32
}

func (d *slowRenewer) Renew(ctx context.Context, leases []drivers.Lease) []drivers.RenewResult {
	select {
	case <-time.After(d.delay):
	case <-ctx.Done():
		out := make([]drivers.RenewResult, len(leases))
		for i := range out {
			out[i].Err = ctx.Err()
		}
		return out
	}
	out := d.faulty.Renew(ctx, leases)
	if len(out) > 0 && out[0].Held {
		d.renewed.Add(1)
	}
	return out
}

// TestSlowRenewalKeepsLocks: a store that answers each renewal in 120 ms,
// more than a third of a 300 ms ttl but well before the lock's expiry,
// keeps the lock renewed: the bound of a renewal call is never below a
// second (a bound of ttl/3 cut every call, and the lock was lost).
//
// In a synctest bubble: each renewal is sent when the previous one
// answers, and its answer comes 47 ms before the tracked expiry (287 ms
// after it was sent). On the host's clock, a renewal timer or the store's
// 120 ms firing that much late on a loaded machine lost the lock, as it
// must when the answer comes after the expiry.
func TestSlowRenewalKeepsLocks(t *testing.T) {
	component.Unpooled(t)
	synctest.Test(t, func(t *testing.T) {
		d := &slowRenewer{faulty: newFaulty(), delay: 120 * time.Millisecond}
		d.faulty.renewed = make(chan error, 100) // at each answer
		m := newMutex(t, component.Options{Driver: d, TTL: 300 * time.Millisecond, RetryDelay: 10 * time.Millisecond})
		l, err := m.Acquire(context.Background(), "slow")
		if err != nil {
			t.Fatal(err)
		}
		// Renewals are sent at 100 ms, then every 120 ms: the fifth
		// answers at 700 ms.
		for range 5 {
			select {
			case err := <-d.faulty.renewed:
				if err != nil {
					t.Fatal(err)
				}
			case <-l.Done():
				t.Fatalf("with a slow but working store: lost after %d renewals: %v", d.renewed.Load(), l.Err())
			}
		}
		synctest.Wait()
		if n, e := d.renewed.Load(), time.Since(l.AcquiredAt()); !l.Held() || n < 5 || e > 700*time.Millisecond {
			t.Fatalf("with a slow but working store: held %v after %d renewals, %v after the acquisition: %v", l.Held(), n, e, l.Err())
		}
	})
}

// renewOnly is a store with batch renewal but no events (no Subscriber):
// no catch-up renewal joins the schedule.
type renewOnly struct {
	drivers.Driver
	r drivers.Renewer
}

func (d renewOnly) Renew(ctx context.Context, leases []drivers.Lease) []drivers.RenewResult {
	return d.r.Renew(ctx, leases)
}

// TestFailedBatchRetriesTogether: the locks of a renewal batch that failed
// retry together, in one call, not each in a call of its own (which would
// multiply the calls to a store already failing).
func TestFailedBatchRetriesTogether(t *testing.T) {
	f := newFaulty()
	f.set(func(f *faulty) { f.renewErr = errors.New("connection refused") })
	// Renewed at 400 ms; the retry comes 300-600 ms later, spread wider
	// than the 200 ms within which due locks are gathered into one batch.
	m := newMutex(t, component.Options{Driver: renewOnly{f, f}, TTL: 1200 * time.Millisecond, RetryDelay: 300 * time.Millisecond})
	var locks []*component.Lock
	for i := range 20 {
		l, err := m.Acquire(context.Background(), fmt.Sprint("l", i))
		if err != nil {
			t.Fatal(err)
		}
		locks = append(locks, l)
	}
	for _, l := range locks {
		<-l.Done()
	}
	// every call but the last, which may come within moments of the
	// expiry, when some locks are lost already, carries all 20
	f.mu.Lock()
	batches := f.batches
	f.mu.Unlock()
	if len(batches) < 2 || slices.ContainsFunc(batches[:len(batches)-1], func(n int) bool { return n != 20 }) {
		t.Fatalf("renewal calls carried %v leases; want every call (at least 2) but the last to carry all 20", batches)
	}
}

// failFirst is a store whose first renewal call fails.
type failFirst struct {
	drivers.Driver
	r     drivers.Renewer
	calls atomic.Int32
}

func (d *failFirst) Renew(ctx context.Context, leases []drivers.Lease) []drivers.RenewResult {
	if d.calls.Add(1) == 1 {
		out := make([]drivers.RenewResult, len(leases))
		for i := range out {
			out[i].Err = errors.New("connection reset")
		}
		return out
	}
	return d.r.Renew(ctx, leases)
}

// TestShortTTLSurvivesAFailedRenewal: one failed renewal does not lose a
// lock whose ttl is shorter than the retry delay: the retry comes within
// half the time left. Before, it came RetryDelay·2 (50-100 ms) later,
// past the expiry of a 100 ms lock, which was lost nearly every time.
func TestShortTTLSurvivesAFailedRenewal(t *testing.T) {
	component.Unpooled(t)
	for i := range 5 { // the retry's jitter differs each time
		synctest.Test(t, func(t *testing.T) {
			md := memory.New()
			d := &failFirst{Driver: md, r: md}
			m := newMutex(t, component.Options{Driver: renewOnly{d, d}, TTL: 100 * time.Millisecond})
			l, err := m.Acquire(context.Background(), "short")
			if err != nil {
				t.Fatal(err)
			}
			// lived through several renewal periods (the bubble's clock)
			select {
			case <-l.Done():
				t.Fatalf("run %d: lost after %d renewal calls: %v", i, d.calls.Load(), context.Cause(l.Context()))
			case <-time.After(500 * time.Millisecond):
			}
			if n := d.calls.Load(); n < 3 {
				t.Fatalf("run %d: %d renewal calls in 500 ms; want the failed one and later ones", i, n)
			}
			if _, err := l.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestHungExtend: a Lock.Extend whose call hangs on a dead connection,
// called with a ctx far longer than the ttl, is bounded as a renewal is (a
// third of the ttl, at least a second): it fails in time for a renewal to
// keep the lock. Before, it hung until the caller's ctx ended, and the
// renewals, which wait for it, never ran: the lock was lost at its expiry.
func TestHungExtend(t *testing.T) {
	h := &hangOnce{entered: make(chan struct{}), ended: make(chan struct{})}
	md := memory.New()
	m := newMutex(t, component.Options{Driver: &hangOnceExtender{Driver: md, hangOnce: h}, TTL: 3 * time.Second, RetryDelay: 10 * time.Millisecond})
	l, err := m.Acquire(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	extended := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() {
		_, err := l.Extend(ctx, 3*time.Second)
		extended <- err
	}()
	<-h.entered
	select {
	case err := <-extended:
		if err == nil {
			t.Fatal("a hung Extend succeeded")
		}
	case <-l.Done():
		t.Fatalf("lost while Extend hung: %v", context.Cause(l.Context()))
	}
	waitUntil(t, "a renewed after the hung Extend", func() bool { return h.renewedAfter(l.Key()) || l.Err() != nil })
	if !l.Held() {
		t.Fatalf("lost: %v", l.Err())
	}
}
