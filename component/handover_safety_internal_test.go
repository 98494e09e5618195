package component

import (
	"context"
	"errors"
	"testing"
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
}

func (h *handing) Handover(ctx context.Context, key, token string, next drivers.AcquireRequest) (bool, drivers.AcquireResult, error) {
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
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		m.mu.Lock()
		q := m.queues[name]
		ok := q != nil && len(q.waiters) == 1 && q.waiters[0].parked
		m.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no waiter parked")
		}
	}
}

// TestHandedLockAfterClose: a lock handed to a waiter and released by
// Close before the waiter woke is not returned: the waiter gets ErrClosed.
func TestHandedLockAfterClose(t *testing.T) {
	ctx := context.Background()
	for range 20 {
		m, err := New(Options{Driver: &handing{Driver: memory.New()}})
		if err != nil {
			t.Fatal(err)
		}
		l, err := m.Acquire(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			l, err := m.Acquire(ctx, "a", WithTimeout(Forever))
			if err == nil && !l.Held() {
				err = errors.New("Acquire returned a lock that is not held")
			}
			got <- err
		}()
		parked(t, m, "a")
		_, _ = l.Release(ctx)
		_ = m.Close(ctx)
		if err := <-got; err != nil && !errors.Is(err, ErrClosed) {
			t.Fatal(err)
		}
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
	time.Sleep(h.delay)
	return true, res, err
}

// TestHandoverAnsweredLate: a handover answered after the waiter's ttl is
// not handed (the lock may have expired in the store): the waiter acquires
// as usual and gets a held lock.
func TestHandoverAnsweredLate(t *testing.T) {
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
		parked(t, m, "a")
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
}

// hung is the memory store as a network store whose Acquire of "mutex:b"
