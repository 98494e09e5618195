package postgres

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
)

// TestTableHandoverQueued checks that a table-mode handover does not pass
// the lock on while another driver queues for the row: it releases it, and
// the queued driver takes it.
func TestTableHandoverQueued(t *testing.T) {
	ctx := ctxT(t)
	a, b := shared(t, Options{Mode: ModeTable}), shared(t, Options{Mode: ModeTable})
	key := fmt.Sprintf("handover:queued:%d", time.Now().UnixNano())
	if res, err := a.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "a", TTL: time.Minute}); err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	waitFor(ctx, b, key) // b queues in the row
	released, res, err := a.Handover(ctx, key, "a", drivers.AcquireRequest{Key: key, Token: "a2", TTL: time.Minute})
	if err != nil || !released || res.Acquired {
		t.Fatalf("Handover with a driver queued = %v, %+v, %v; want released, not handed", released, res, err)
	}
	if res, err := b.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "b", TTL: time.Minute, Wait: time.Second}); err != nil || !res.Acquired {
		t.Fatalf("queued driver's Acquire after the release = %+v, %v; want acquired", res, err)
	}
}

// gated is a driver whose Handover waits for the test's go-ahead.
type gated struct {
	Driver
	entered chan struct{}
	proceed chan struct{}
}

func (g gated) Handover(ctx context.Context, key, token string, next drivers.AcquireRequest) (bool, drivers.AcquireResult, error) {
	g.entered <- struct{}{}
	<-g.proceed
	return g.Driver.Handover(ctx, key, token, next)
}

// TestHandoverWaiterGone checks a handover to a waiter that gives up while
// the store hands the lock over: its Acquire returns its context's error,
// the holder's Release reports true, and the lock taken for nobody is
// released in the store.
func TestHandoverWaiterGone(t *testing.T) {
	ctx := ctxT(t)
	g := gated{Driver: shared(t, Options{Mode: ModeTable}), entered: make(chan struct{}), proceed: make(chan struct{})}
	m := mutexOn(t, g, 10*time.Second)
	name := fmt.Sprintf("handover:gone:%d", time.Now().UnixNano())
	first, err := m.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	waited := make(chan error, 1)
	go func() {
		l, err := m.Acquire(wctx, name, component.WithTimeout(time.Minute))
		if err == nil {
			_, _ = l.Release(ctx)
		}
		waited <- err
	}()
	within(t, 5*time.Second, "a waiter", func() bool { return m.Waiters(name) == 1 })
	released := make(chan bool, 1)
	go func() {
		ok, _ := first.Release(ctx)
		released <- ok
	}()
	<-g.entered
	cancel()
	if err := <-waited; !errors.Is(err, context.Canceled) {
		t.Fatalf("waiter's Acquire = %v; want context.Canceled", err)
	}
	close(g.proceed)
	if !<-released {
		t.Fatal("holder's Release = false; want true")
	}
	within(t, 5*time.Second, "the orphaned lock released in the store", func() bool {
		_, held, err := g.Inspect(ctx, "fault:"+name)
		return err == nil && !held
	})
	if l, err := m.TryAcquire(ctx, name); err != nil {
		t.Fatalf("TryAcquire afterwards: %v", err)
	} else {
		_, _ = l.Release(ctx)
	}
}

// TestAdvisoryHandoverWaiting checks advisory mode's handover: with no
// other session waiting for the lock it keeps the server lock for the new
// token, with a new fence; with a session of another driver waiting for it
// in the server it unlocks instead, and that waiter gets the lock.
func TestAdvisoryHandoverWaiting(t *testing.T) {
	ctx := ctxT(t)
	a, b := shared(t, Options{}), shared(t, Options{})
	key := fmt.Sprintf("handover:advisory:%d", time.Now().UnixNano())
	req := func(tok string) drivers.AcquireRequest {
		return drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute}
	}
	first, err := a.Acquire(ctx, req("a1"))
	if err != nil || !first.Acquired {
		t.Fatalf("Acquire = %+v, %v", first, err)
	}
	released, res, err := a.Handover(ctx, key, "a1", req("a2"))
	if err != nil || !released || !res.Acquired || res.Fence <= first.Fence {
		t.Fatalf("Handover with nobody waiting = %v, %+v, %v; want handed with a fence > %d", released, res, err, first.Fence)
	}

	got := make(chan drivers.AcquireResult, 1)
	go func() {
		r := req("b")
		r.Wait = 20 * time.Second
		res, err := b.Acquire(ctx, r)
		if err != nil {
			t.Errorf("waiting Acquire: %v", err)
		}
		got <- res
	}()
	conn := connectT(t)
	// the server offers no signal of a session starting to wait: look
	within(t, 10*time.Second, "a session waiting for the lock", func() bool {
		var n int
		err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"+
			" AND ((classid::bigint << 32) | objid::bigint) = $1", advisoryKey(key)).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
	released, res, err = a.Handover(ctx, key, "a2", req("a3"))
	if err != nil || !released || res.Acquired {
		t.Fatalf("Handover with a session waiting = %v, %+v, %v; want released, not handed", released, res, err)
	}
	if r := <-got; !r.Acquired || r.Fence <= first.Fence+1 {
		t.Fatalf("waiter's Acquire = %+v; want acquired with a fence > %d", r, first.Fence+1)
	}
	if ok, err := b.Release(ctx, key, "b"); err != nil || !ok {
		t.Errorf("waiter's Release = %v, %v", ok, err)
	}
}
