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

// Queues and waiters are pooled: an uncontended acquisition allocates
// neither.
var (
	queuePool  = sync.Pool{New: func() any { return new(queue) }}
	waiterPool = sync.Pool{New: newWaiter}
)

func newWaiter() any { return &waiter{wake: make(chan struct{}, 1)} }

// enqueue appends a waiter for name, for a lock of ttl; m.mu held.
func (m *Mutex) enqueue(name string, ttl time.Duration) *waiter {
	q := m.queues[name]
	if q == nil {
		q = queuePool.Get().(*queue)
		m.queues[name] = q
	}
	var w *waiter
	if bubble.Unpooled.Load() {
		w = newWaiter().(*waiter)
	} else {
		w = waiterPool.Get().(*waiter)
	}
	w.ttl, w.parked = ttl, false
	q.waiters = append(q.waiters, w)
	return w
}

// requeue puts w back at the head of name's queue, which a handover took
// it out of; m.mu held.
func (m *Mutex) requeue(name string, w *waiter) {
	q := m.queues[name]
	if q == nil {
		q = queuePool.Get().(*queue)
		m.queues[name] = q
	}
	q.waiters = slices.Insert(q.waiters, 0, w)
}

// dequeue removes w (if still queued), wakes the new head and recycles w:
// its owner's last use. Waiters are only signalled under m.mu while queued.
// A lock handed to w that its owner did not take (it gave up meanwhile) is
// released; a w a handover is still under way for is left to that
// handover, which finds it gone, and to the garbage collector.
func (m *Mutex) dequeue(name string, w *waiter) {
	m.mu.Lock()
	m.removeWaiter(name, w)
	handed, handing := w.handed, w.handing
	w.handed = nil
	if handed != nil {
		m.end(handed, stateReleased, ErrReleased)
		m.cleanupLocked(handed.key, handed.token)
	}
	m.mu.Unlock()
	if handing {
		return
	}
	select {
	case <-w.wake:
	default:
	}
	if !bubble.Unpooled.Load() {
		waiterPool.Put(w)
	}
}

// forgetQueue drops an empty queue; m.mu held.
func (m *Mutex) forgetQueue(name string, q *queue) {
	delete(m.queues, name)
	clear(q.waiters[:cap(q.waiters)])
	q.waiters = q.waiters[:0]
	queuePool.Put(q)
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
