package drivertest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
)

// testLostWhenTaken: when another holder has the lock (here it is freed in
// the store behind the holder's back and taken), the next renewal loses it.
func (s *suite) testLostWhenTaken(t *testing.T) {
	ctx := ctxT(t)
	d := s.driver(t)
	if !drivers.FeaturesOf(d).Expiring {
		t.Log("session locks cannot be taken while their session lives; the drivers test broken sessions")
		return
	}
	a, b := s.mutex(t, nil, component.Options{}), s.mutex(t, nil, component.Options{})
	n := name(t)
	l, err := a.Acquire(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if ok, err := d.Release(ctx, "drivertest:"+n, l.Token()); !ok || err != nil {
		t.Fatalf("Release behind the holder's back = %v, %v", ok, err)
	}
	l2, err := b.Acquire(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Release(ctx)
	select {
	case <-l.Done():
	case <-time.After(s.h.TTL):
		t.Fatalf("lock still not lost %v after it was taken", time.Since(start))
	}
	if !errors.Is(context.Cause(l.Context()), component.ErrLost) || l.Held() {
		t.Fatalf("cause %v, held %v; want ErrLost", context.Cause(l.Context()), l.Held())
	}
	if ok, err := l.Release(ctx); ok || err != nil {
		t.Fatalf("Release of a lost lock = %v, %v; want false", ok, err)
	}
	if held := a.Held(); len(held) != 0 {
		t.Fatalf("Held() = %v after the loss", held)
	}
}

// testLostWhenStoreStalls: a holder whose store stops answering is told the
// lock is lost before another holder can get it.
func (s *suite) testLostWhenStoreStalls(t *testing.T) {
	ctx := ctxT(t)
	sd := &stallDriver{Driver: s.h.New(t)}
	a := s.mutex(t, sd, component.Options{})
	b := s.mutex(t, nil, component.Options{})
	n := name(t)
	l, err := a.Acquire(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	sd.stall()
	t.Cleanup(sd.resume)
	stalled := time.Now()

	// Another holder tries all along (an expiring store frees the lock at
	// its ttl): when it first gets the lock, the holder must have been told.
	expiring := drivers.FeaturesOf(sd).Expiring
	type grab struct {
		l         *component.Lock
		toldFirst bool
	}
	got := make(chan grab, 1)
	stop := make(chan struct{})
	if expiring {
		go func() {
			for {
				select {
				case <-stop:
					got <- grab{}
					return
				default:
				}
				if l2, err := b.TryAcquire(ctx, n); err == nil {
					told := l.Context().Err() != nil
					got <- grab{l2, told}
					return
				}
				time.Sleep(2 * time.Millisecond) // the other holder's polling
			}
		}()
	}
	select {
	case <-l.Done():
	case <-time.After(2 * s.h.TTL):
		close(stop)
		t.Fatalf("lock not lost %v after its store stalled (ttl %v)", time.Since(stalled), s.h.TTL)
	}
	if !errors.Is(l.Err(), component.ErrLost) {
		close(stop)
		t.Fatalf("cause %v; want ErrLost", l.Err())
	}
	if !expiring {
		return
	}
	var g grab
	select {
	case g = <-got:
	case <-time.After(5 * s.h.TTL):
		close(stop)
		<-got
		t.Fatalf("the other holder did not get the expired lock within %v", 5*s.h.TTL)
	}
	defer g.l.Release(ctx)
	if !g.toldFirst {
		t.Fatal("another holder got the lock before the holder was told it was lost")
	}
}

func (s *suite) testWakeUp(t *testing.T) {
	ctx := ctxT(t)
	d := s.h.New(t)
	sub, ok := d.(drivers.Subscriber)
	if !ok {
		d.Close(ctx)
		t.Log("the driver pushes no wake-ups: waiters poll")
		return
	}
	a := s.mutex(t, nil, component.Options{TTL: 30 * time.Second})
	// A retry delay of 5 s: only a wake-up brings the waiter in sooner.
	cd := &countingDriver{Driver: d, sub: sub}
	b := s.mutex(t, cd, component.Options{RetryDelay: 5 * time.Second, TTL: 30 * time.Second})
	n := name(t)
	l, err := a.Acquire(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan time.Duration, 1)
	go func() {
		l2, err := b.Acquire(ctx, n, component.WithTimeout(20*time.Second))
		if err != nil {
			t.Errorf("waiter: %v", err)
			got <- -1
			return
		}
		got <- time.Since(l2.AcquiredAt())
		l2.Release(ctx)
	}()
	// Release once the waiter is waiting: its first attempt answered "taken"
	// (it now sleeps 2.5–5 s unless woken), or, for a store that waits for
	// it (BlockingWait), its attempt is under way.
	waitFor(t, 5*time.Second, "the waiter's first attempt", func() bool {
		if drivers.FeaturesOf(d).BlockingWait {
			return cd.started.Load() >= 1
		}
		return cd.answered.Load() >= 1
	})
	released := time.Now()
	l.Release(ctx)
	<-got
	if e := time.Since(released); e > time.Second {
		t.Fatalf("waiter took %v after the release; a wake-up should bring it in well under its 2.5 s retry delay", e)
	}
}

// countingDriver counts a driver's acquisition attempts, keeping its
// features and its events.
type countingDriver struct {
	drivers.Driver
	sub               drivers.Subscriber
	started, answered atomic.Int32
}

func (c *countingDriver) Features() drivers.Features { return drivers.FeaturesOf(c.Driver) }

func (c *countingDriver) Subscribe(ctx context.Context, fn func(drivers.Event)) (func(), error) {
	return c.sub.Subscribe(ctx, fn)
}

func (c *countingDriver) Acquire(ctx context.Context, req drivers.AcquireRequest) (drivers.AcquireResult, error) {
	c.started.Add(1)
	defer c.answered.Add(1)
	return c.Driver.Acquire(ctx, req)
}
