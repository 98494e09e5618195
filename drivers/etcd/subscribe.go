package etcd

import (
	"context"

	"github.com/mutexfx/mutexfx/drivers"
)

// Subscribe calls fn with a Lost event for every lock of this driver whose
// lease the driver finds gone (expired or revoked), by whichever call finds
// it: a renewal, or an attempt or extension on the same lease, so a lock
// may be reported lost before its own next renewal. Released events are
// not sent: a waiter blocks in the store (a watch) instead.
func (d *Driver) Subscribe(_ context.Context, fn func(drivers.Event)) (func(), error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, ErrClosed
	}
	remove := d.subs.Add(fn)
	return func() { remove() }, nil
}

// leaseGone forgets l, which the cluster no longer has, and reports every
// lock held on it lost: to the subscribers, and to its entry. An entry
// busy in another call is left to that call, which finds the loss itself.
func (d *Driver) leaseGone(l *lease) {
	l.setGone()
	d.leases.drop(l)
	// Driver.mu is held throughout: unuse reads the fields of an entry
	// nobody uses under Driver.mu alone, and this pass writes them in
	// entries nobody uses. e.mu is only tried, never waited for, so that
	// holding Driver.mu here cannot deadlock with a call holding e.mu.
	d.mu.Lock()
	defer d.mu.Unlock()
	var lost []drivers.Event
	for _, e := range d.entries {
		select {
		case e.mu <- struct{}{}:
		default:
			continue
		}
		if e.lease == l {
			if e.held {
				lost = append(lost, drivers.Event{Kind: drivers.Lost, Key: e.key, Token: e.token})
			}
			e.rev, e.held, e.lease = 0, false, nil
		}
		e.mu.unlock()
	}
	if len(lost) == 0 || d.subs.Len() == 0 || d.closed {
		return
	}
	// From a goroutine of the driver's: the caller may hold locks that a
	// subscriber's fn takes too.
	d.wg.Go(func() { d.subs.Publish(lost...) })
}
