package component_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
)

// slowSubscriber pushes the memory store's events once its Subscribe call
// gets through the open gate; until then the call hangs (until its ctx
// ends, as a store that does not answer does). It counts the answered
// acquisition attempts.
type slowSubscriber struct {
	*faulty
	entered  chan struct{} // Subscribe was called
	enter    sync.Once
	open     chan struct{} // closed to let it through
	returned chan struct{} // Subscribe returned
	leave    sync.Once
	answered atomic.Int32
}

func newSlowSubscriber() *slowSubscriber {
	return &slowSubscriber{faulty: newFaulty(), entered: make(chan struct{}), open: make(chan struct{}), returned: make(chan struct{})}
}

func (s *slowSubscriber) Subscribe(ctx context.Context, fn func(drivers.Event)) (func(), error) {
	s.enter.Do(func() { close(s.entered) })
	defer s.leave.Do(func() { close(s.returned) })
	select {
	case <-s.open:
		return s.faulty.Driver.Subscribe(ctx, fn)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *slowSubscriber) Acquire(ctx context.Context, req drivers.AcquireRequest) (drivers.AcquireResult, error) {
	defer s.answered.Add(1)
	return s.faulty.Acquire(ctx, req)
}

// TestSlowSubscription: acquisitions do not wait for a subscription to the
// store's events that does not answer, whether their ctx is live or has
// ended; Close cancels it.
func TestSlowSubscription(t *testing.T) {
	s := newSlowSubscriber()
	m, err := component.New(component.Options{Driver: s})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ended, cancel := context.WithCancel(ctx)
	cancel()
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"TryAcquire", func() error {
			if l, err := m.TryAcquire(ctx, "a"); l == nil || err != nil {
				return errors.Join(errors.New("no lock"), err)
			}
			return nil
		}},
		{"NoWait", func() error {
			_, err := m.Acquire(ctx, "b", component.WithTimeout(component.NoWait))
			return err
		}},
		{"EndedCtx", func() error {
			if _, err := m.TryAcquire(ended, "c"); !errors.Is(err, context.Canceled) {
				return errors.Join(errors.New("want context.Canceled"), err)
			}
			return nil
		}},
	} {
		if err := tc.call(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		<-s.entered // the subscription started with the first call
		select {
		case <-s.returned:
			t.Fatalf("%s returned after the subscription had given up: it waited for it", tc.name)
		default:
		}
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.returned:
	default:
		t.Fatal("Close returned before the subscription ended")
	}
}

// TestSubscriptionCatchesUp: what the store reported before the
// subscription was in place is not missed — a waiter whose release event
// came too early looks again, and a lock lost meanwhile is found lost —
// once the subscription is in place, not at the waiter's next poll (2.5 s
// or more away) or the lock's next renewal (10 s away).
func TestSubscriptionCatchesUp(t *testing.T) {
	ctx := context.Background()
	s := newSlowSubscriber()
	holder := newMutex(t, component.Options{Driver: s.faulty.Driver})
	m := newMutex(t, component.Options{Driver: s, RetryDelay: 5 * time.Second})

	// a lock of m, lost before m is subscribed
	lost, err := m.Acquire(ctx, "lost")
	if err != nil {
		t.Fatal(err)
	}
	s.faulty.Revoke(lost.Key())

	// a waiter of m, whose wake-up comes before m is subscribed
	held, err := holder.Acquire(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := m.Acquire(ctx, "x")
		if err == nil {
			l.Release(ctx)
		}
		got <- err
	}()
	// its first attempt answered "taken": it sleeps 2.5-5 s unless woken
	waitUntil(t, "the waiter's first attempt", func() bool { return s.answered.Load() >= 2 })
	held.Release(ctx)

	<-s.entered
	subscribed := time.Now()
	close(s.open)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if e := time.Since(subscribed); e > time.Second {
		t.Fatalf("the waiter took the lock %v after the subscription; want it looking again at once, not at its next poll", e)
	}
	select {
	case <-lost.Done():
	case <-time.After(2 * time.Second): // its next renewal is 10 s away
		t.Fatal("a lock lost before the subscription is still held after it")
	}
	if !errors.Is(lost.Err(), component.ErrLost) {
		t.Fatalf("lost lock: %v", lost.Err())
	}
}
