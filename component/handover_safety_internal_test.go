package component

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/memory"
)

// Tests of the safety rule around handovers (a release passing the lock to
// the next waiter in the store): see safety_internal_test.go.

// handing is the memory store with a Handover (release, then acquire for
// the new token), whose reply can be lost after it acted.
type handing struct {
	*memory.Driver
	replyLost bool
	// handedReleased, when set, is closed when the token of the last
	// handover is released
	handedReleased chan struct{}
	handed         atomic.Pointer[string]
}

func (h *handing) Release(ctx context.Context, key, token string) (bool, error) {
	ok, err := h.Driver.Release(ctx, key, token)
	if t := h.handed.Load(); h.handedReleased != nil && t != nil && *t == token {
		close(h.handedReleased)
	}
	return ok, err
}

func (h *handing) Handover(ctx context.Context, key, token string, next drivers.AcquireRequest) (bool, drivers.AcquireResult, error) {
	h.handed.Store(&next.Token)
	ok, err := h.Driver.Release(ctx, key, token)
	if err != nil || !ok {
		return ok, drivers.AcquireResult{}, err
	}
	res, err := h.Driver.Acquire(ctx, next)
	if h.replyLost {
		return true, drivers.AcquireResult{}, errors.New("connection reset")
	}
	return true, res, err
}

// parked waits until name's queue has a waiter parked behind the holder.
func parked(t *testing.T, m *Mutex, name string) {
	t.Helper()
	pollLocked(t, m, "a parked waiter", func() bool {
		q := m.queues[name]
		return q != nil && len(q.waiters) == 1 && q.waiters[0].parked
	})
}

// TestHandedLockAfterClose: a lock handed to a waiter and released by
// Close before the waiter woke is not returned: the waiter gets ErrClosed.
// The waiter is held at its wake-up (testHookWoken) until Close has
// released the handed lock in the store.
func TestHandedLockAfterClose(t *testing.T) {
	ctx := context.Background()
	d := &handing{Driver: memory.New(), handedReleased: make(chan struct{})}
	m, err := New(Options{Driver: d})
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.Acquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	testHookWoken = func() {
		select {
		case <-d.handedReleased:
		case <-time.After(5 * time.Second): // the test fails below
		}
	}
	t.Cleanup(func() { testHookWoken = nil })
	got := make(chan error, 1)
	go func() {
		l, err := m.Acquire(ctx, "a", WithTimeout(Forever))
		if err == nil {
			err = fmt.Errorf("Acquire returned a lock (held %v) that Close had released", l.Held())
		}
		got <- err
	}()
	parked(t, m, "a")
	if ok, err := l.Release(ctx); !ok || err != nil {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	if err := m.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-got; !errors.Is(err, ErrClosed) {
		t.Fatalf("waiter: %v; want ErrClosed", err)
	}
}

// TestHandoverFailureReleases: a handover whose reply was lost may have
// handed the lock over in the store; the new token is released, so that
// the waiter gets the lock without waiting for its ttl.
func TestHandoverFailureReleases(t *testing.T) {
	ctx := context.Background()
	m := newOn(t, &handing{Driver: memory.New(), replyLost: true}, time.Minute)
	l, err := m.Acquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := m.Acquire(ctx, "a", WithTimeout(5*time.Second))
		if err == nil {
			_, err = l.Release(ctx)
		}
		got <- err
	}()
	parked(t, m, "a")
	if _, err := l.Release(ctx); err == nil {
		t.Fatal("Release with a lost handover reply: no error")
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v", err)
	}
}

// slowHanding hands a lock over in the store and answers late.
type slowHanding struct {
	*memory.Driver
	delay time.Duration
}

func (h *slowHanding) Handover(ctx context.Context, key, token string, next drivers.AcquireRequest) (bool, drivers.AcquireResult, error) {
	ok, err := h.Driver.Release(ctx, key, token)
	if err != nil || !ok {
		return ok, drivers.AcquireResult{}, err
	}
	res, err := h.Driver.Acquire(ctx, next)
	time.Sleep(h.delay) // the store answers late (in a synctest bubble: its clock)
	return true, res, err
}

// TestHandoverAnsweredLate: a handover answered after the waiter's ttl is
// not handed (the lock may have expired in the store): the waiter acquires
// as usual and gets a held lock. In a synctest bubble: the handover is
// answered 150 ms late on the bubble's clock.
func TestHandoverAnsweredLate(t *testing.T) {
	Unpooled(t)
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		for range 10 {
			st := &slowHanding{Driver: memory.New(), delay: 150 * time.Millisecond}
			m, err := New(Options{Driver: st, TTL: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			first, err := m.Acquire(ctx, "a")
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan *Lock, 1)
			go func() {
				l, err := m.Acquire(ctx, "a", WithTimeout(5*time.Second))
				if err != nil {
					t.Error(err)
				}
				got <- l
			}()
			waitLocked(t, m, "a parked waiter", func() bool {
				q := m.queues["a"]
				return q != nil && len(q.waiters) == 1 && q.waiters[0].parked
			})
			_, _ = first.Release(ctx)
			l := <-got
			if l != nil {
				info, held, _ := st.Inspect(ctx, l.Key())
				if !l.Held() || !held || info.Token != l.Token() {
					t.Errorf("Acquire returned a lock not held: Held %v, store held %v by %q", l.Held(), held, info.Token)
				}
			}
			_ = m.Close(ctx)
		}
	})
}

// hung is the memory store as a network store whose Acquire of "mutex:b"

// overlapping is handing whose Acquire calls record how many were in flight
// at once and, once the test sets gate, wait for it to close: the calls
// made meanwhile overlap.
type overlapping struct {
	*handing
	gate           atomic.Pointer[chan struct{}]
	inflight, most atomic.Int32
}

func (o *overlapping) Acquire(ctx context.Context, req drivers.AcquireRequest) (drivers.AcquireResult, error) {
	n := o.inflight.Add(1)
	defer o.inflight.Add(-1)
	for m := o.most.Load(); n > m && !o.most.CompareAndSwap(m, n); m = o.most.Load() {
	}
	if g := o.gate.Load(); g != nil {
		select {
		case <-*g:
		case <-ctx.Done():
			return drivers.AcquireResult{}, ctx.Err()
		}
	}
	return o.handing.Acquire(ctx, req)
}

// TestHandedLockLostBeforeWake: a lock handed to a waiter and lost before
// the waiter woke to take it puts that waiter back first in line, and only
// it goes to the store: the waiter after it is not woken too. Before, the
// loss woke the next waiter, and the first, waking, put itself back at the
// head: both called the store at once. The first waiter is held at its
// wake-up (testHookWoken) while the handed lock is lost; in a synctest
// bubble, the store's answers wait (gate) until every waiter that was
// going to call it has.
func TestHandedLockLostBeforeWake(t *testing.T) {
	Unpooled(t)
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		d := &overlapping{handing: &handing{Driver: memory.New()}}
		m := newOn(t, d, 5*time.Second)
		l, err := m.Acquire(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		hold := make(chan struct{})
		var woken atomic.Int32
		testHookWoken = func() {
			if woken.Add(1) == 1 { // the first waiter, woken by the handover
				<-hold
			}
		}
		t.Cleanup(func() { testHookWoken = nil })
		got := make(chan error, 2)
		for range 2 {
			go func() {
				l, err := m.Acquire(ctx, "a", WithTimeout(10*time.Second))
				if err == nil {
					_, err = l.Release(ctx)
				}
				got <- err
			}()
		}
		waitLocked(t, m, "two parked waiters", func() bool {
			q := m.queues["a"]
			return q != nil && len(q.waiters) == 2 && q.waiters[0].parked && q.waiters[1].parked
		})
		gate := make(chan struct{})
		d.gate.Store(&gate)
		if ok, err := l.Release(ctx); !ok || err != nil { // handed to the first waiter
			t.Fatalf("Release = %v, %v", ok, err)
		}
		waitLocked(t, m, "the first waiter woken", func() bool { return woken.Load() == 1 })
		m.mu.Lock()
		handed := m.held["a"]
		first := handed.handedTo
		m.mu.Unlock()
		d.Driver.RevokeToken(handed.key, handed.token) // lost in the store, which tells the Mutex
		waitLocked(t, m, "the handed lock lost", func() bool { return handed.state == stateLost })
		m.mu.Lock()
		q := m.queues["a"]
		requeued := q != nil && len(q.waiters) == 2 && q.waiters[0] == first
		m.mu.Unlock()
		if !requeued {
			t.Error("the waiter the lost lock was handed to is not first in line again")
		}
		close(hold)
		synctest.Wait() // every waiter going to the store is in its call
		if n := d.inflight.Load(); n != 1 {
			t.Errorf("%d store calls of waiters at once after the wake-up; want 1 (only the head)", n)
		}
		close(gate)
		for range 2 {
			if err := <-got; err != nil {
				t.Fatal(err)
			}
		}
		if n := d.most.Load(); n != 1 {
			t.Fatalf("%d store calls of waiters at once; want 1 (only the head)", n)
		}
	})
}
