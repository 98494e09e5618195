package component

import (
	"context"
	"sync"
)

// Close releases the locks the Mutex holds (failures ignored, bounded by
// ctx), ends its waits with ErrClosed, stops its background work and closes
// the driver. Calls after Close fail with ErrClosed; Close again returns nil.
//
// The locks' contexts are cancelled (cause ErrClosed) before they are
// released in the store. Store attempts in flight are cancelled, and Close
// waits for them (bounded by ctx) while it releases the held locks, so that
// a lock one of them got is released before the driver closes.
func (m *Mutex) Close(ctx context.Context) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	locks := make([]*Lock, 0, len(m.held))
	for _, l := range m.held {
		if l.state == stateHeld {
			l.releasing(ErrClosed)
			locks = append(locks, l)
		}
	}
	for _, q := range m.queues {
		for _, w := range q.waiters {
			w.signal()
		}
	}
	close(m.stop)
	m.closingCancel()
	var settled chan struct{}
	if m.attempts > 0 {
		m.settled = make(chan struct{})
		settled = m.settled
	}
	m.mu.Unlock()

	var wg sync.WaitGroup
	for _, l := range locks {
		wg.Go(func() {
			_, _ = m.drv.Release(ctx, l.key, l.token)
			m.mu.Lock()
			m.end(l, stateReleased, ErrClosed)
			m.mu.Unlock()
		})
	}
	if settled != nil {
		select {
		case <-settled:
		case <-ctx.Done():
		}
	}
	wg.Wait()
	m.mu.Lock()
	m.draining = true // no background work starts after this
	m.mu.Unlock()
	m.bgCancel()
	stop := context.AfterFunc(ctx, m.cleanupsCancel)
	m.wg.Wait() // renewals end at once; cleanups within attemptGrace, or as ctx ends
	stop()
	m.cleanupsCancel()
	m.subMu.Lock()
	if m.unsub != nil {
		m.unsub()
		m.unsub = nil
	}
	m.subMu.Unlock()
	if err := m.drv.Close(ctx); err != nil {
		return m.driverError("close", "", err)
	}
	return nil
}

// beginAttempt counts a store attempt in flight, for Close to wait for;
// false after Close.
func (m *Mutex) beginAttempt() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	m.attempts++
	return true
}

// endAttempt ends what beginAttempt counted.
func (m *Mutex) endAttempt() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.attempts--
	if m.attempts == 0 && m.settled != nil {
		close(m.settled)
		m.settled = nil
	}
}

// cleanupContext bounds a background release. Close waits for it (a
// release cut short would leave the lock held in the store for its ttl),
// and cuts it short only when its own ctx ends.
func (m *Mutex) cleanupContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(m.cleanups, attemptGrace)
}
