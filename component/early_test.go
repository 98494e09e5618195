package component_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/memory"
)

// earlyLoser is the memory store, not in process, whose Acquire, once
// armed, revokes the lock it has just granted before it answers: the
// store's Lost event arrives while the acquisition is still in flight, as
// a hang-up watch's does when a connection ends right after a grant.
type earlyLoser struct {
	*memory.Driver
	armed atomic.Bool
}

func (d *earlyLoser) Features() drivers.Features {
	f := d.Driver.Features()
	f.InProcess = false
	return f
}

func (d *earlyLoser) Acquire(ctx context.Context, req drivers.AcquireRequest) (drivers.AcquireResult, error) {
	res, err := d.Driver.Acquire(ctx, req)
	if err == nil && res.Acquired && d.armed.Load() {
		d.RevokeToken(req.Key, req.Token)
	}
	return res, err
}

// TestLostWhileAcquiring: a loss the store reports before the acquisition
// that took the lock has returned ends the lock at once, not at its next
// renewal (10 s away).
func TestLostWhileAcquiring(t *testing.T) {
	ctx := context.Background()
	d := &earlyLoser{Driver: memory.New()}
	m := newMutex(t, component.Options{Driver: d, TTL: 30 * time.Second})

	// Once a revoked lock has ended, the subscription is in place (its
	// event, or the catch-up renewal after subscribing, ended it).
	probe, err := m.Acquire(ctx, "probe")
	if err != nil {
		t.Fatal(err)
	}
	d.Revoke(probe.Key())
	select {
	case <-probe.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a revoked lock is still held: no subscription")
	}

	d.armed.Store(true)
	l, err := m.Acquire(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("a lock the store reported lost during its acquisition is still held")
	}
	if err := l.Err(); !errors.Is(err, component.ErrLost) {
		t.Fatalf("Err = %v; want ErrLost", err)
	}
}
