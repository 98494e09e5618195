package component

import (
	"slices"
	"sync"
)

// queue is the FIFO of the waiters for one name; guarded by Mutex.mu. The
// first waiter is the only one that talks to the store.
type queue struct {
	waiters []*waiter
}

type waiter struct {
	wake chan struct{} // buffered 1: a hint to look again
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
	waiterPool = sync.Pool{New: func() any { return &waiter{wake: make(chan struct{}, 1)} }}
)

// enqueue appends a waiter for name; m.mu held.
func (m *Mutex) enqueue(name string) *waiter {
	q := m.queues[name]
	if q == nil {
		q = queuePool.Get().(*queue)
		m.queues[name] = q
	}
	w := waiterPool.Get().(*waiter)
	q.waiters = append(q.waiters, w)
	return w
}

// dequeue removes w (if still queued), wakes the new head and recycles w:
// its owner's last use. Waiters are only signalled under m.mu while queued.
func (m *Mutex) dequeue(name string, w *waiter) {
	m.mu.Lock()
	m.removeWaiter(name, w)
	m.mu.Unlock()
	select {
	case <-w.wake:
	default:
	}
	waiterPool.Put(w)
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
	m.mu.Lock()
	defer m.mu.Unlock()
	if q := m.queues[name]; q != nil {
		return len(q.waiters)
	}
	return 0
}
