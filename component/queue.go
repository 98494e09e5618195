package component

import (
	"slices"
	"sync"
	"time"

	"github.com/mutexfx/mutexfx/internal/bubble"
)

// queue is the FIFO of the waiters for one name; guarded by Mutex.mu. The
// first waiter is the only one that talks to the store.
type queue struct {
	waiters []*waiter
}

type waiter struct {
	wake chan struct{} // buffered 1: a hint to look again
	ttl  time.Duration // of the lock it waits for

	// Guarded by Mutex.mu. parked: its last look found that it has to
	// wait for this Mutex's holder or for an earlier waiter, so it is not
	// talking to the store. Set by a handover (handover.go): handing while
	// the store hands the lock over to this waiter, then handed, the lock
	// for the waiter to take.
	parked  bool
	handing bool
	handed  *Lock
}

func (w *waiter) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Queues and waiters are recycled: an uncontended acquisition allocates
// neither. Each Mutex keeps one spare of each (Mutex.spareQueue,
// spareWaiter, under its mu), which an acquisition at a time reuses at the
// cost of a field; the others go through these pools.
var (
	queuePool  = sync.Pool{New: func() any { return new(queue) }}
	waiterPool = sync.Pool{New: newWaiter}
)

func newWaiter() any { return &waiter{wake: make(chan struct{}, 1)} }

// enqueue appends a waiter for name, for a lock of ttl; m.mu held.
func (m *Mutex) enqueue(name string, ttl time.Duration) *waiter {
	q := m.queueOf(name)
	var w *waiter
	switch {
	case bubble.Unpooled.Load():
		w = newWaiter().(*waiter)
	case m.spareWaiter != nil:
		w, m.spareWaiter = m.spareWaiter, nil
	default:
		w = waiterPool.Get().(*waiter)
	}
	w.ttl, w.parked = ttl, false
	q.waiters = append(q.waiters, w)
	return w
}

// queueOf returns name's queue, made (recycled) if it has none; m.mu held.
func (m *Mutex) queueOf(name string) *queue {
	q := m.queues[name]
	if q == nil {
		if q, m.spareQueue = m.spareQueue, nil; q == nil {
			q = queuePool.Get().(*queue)
		}
		m.queues[name] = q
	}
	return q
}

// requeue puts w back at the head of name's queue, which a handover took
// it out of; m.mu held.
func (m *Mutex) requeue(name string, w *waiter) {
	q := m.queueOf(name)
	q.waiters = slices.Insert(q.waiters, 0, w)
}

// dequeue removes w (if still queued), wakes the new head and recycles w:
// its owner's last use. Waiters are only signalled under m.mu while queued.
// A lock handed to w that its owner did not take (it gave up meanwhile) is
// released; a w a handover is still under way for is left to that
// handover, which finds it gone, and to the garbage collector.
func (m *Mutex) dequeue(name string, w *waiter) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dequeueLocked(name, w)
}

// dequeueLocked is dequeue with m.mu held.
func (m *Mutex) dequeueLocked(name string, w *waiter) {
	m.removeWaiter(name, w)
	handed, handing := w.handed, w.handing
	w.handed = nil
	if handed != nil {
		m.end(handed, stateReleased, ErrReleased)
		m.cleanupLocked(handed.key, handed.token)
	}
	if handing {
		return
	}
	// Out of the queue, w is signalled no more: drained, it is as new.
	select {
	case <-w.wake:
	default:
	}
	switch {
	case bubble.Unpooled.Load():
	case m.spareWaiter == nil:
		m.spareWaiter = w
	default:
		waiterPool.Put(w)
	}
}

// forgetQueue drops an empty queue; m.mu held.
func (m *Mutex) forgetQueue(name string, q *queue) {
	delete(m.queues, name)
	clear(q.waiters[:cap(q.waiters)])
	q.waiters = q.waiters[:0]
	if m.spareQueue == nil {
		m.spareQueue = q
	} else {
		queuePool.Put(q)
	}
}

// removeWaiter removes w from name's queue, waking the next waiter when w
// was first, and forgets an empty queue; m.mu held.
func (m *Mutex) removeWaiter(name string, w *waiter) {
	q := m.queues[name]
	if q == nil {
		return
	}
	i := slices.Index(q.waiters, w)
	if i < 0 {
		return
	}
	q.waiters = slices.Delete(q.waiters, i, i+1)
	if len(q.waiters) == 0 {
		m.forgetQueue(name, q)
		return
	}
	if i == 0 {
		q.waiters[0].signal()
	}
}

// wakeHead tells the first waiter for name to look again; m.mu held.
func (m *Mutex) wakeHead(name string) {
	if q := m.queues[name]; q != nil && len(q.waiters) > 0 {
		q.waiters[0].signal()
	}
}

// Waiters returns how many calls of this Mutex are waiting for the lock
// name (the first one is the one talking to the store).
func (m *Mutex) Waiters(name string) int {
	m.mustBuilt()
	m.mu.Lock()
	defer m.mu.Unlock()
	if q := m.queues[name]; q != nil {
		return len(q.waiters)
	}
	return 0
}
