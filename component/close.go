package component

import (
	"context"
	"errors"
	"sync"
)

// Close releases the locks the Mutex holds (failures ignored, bounded by
// ctx), ends its waits with ErrClosed, stops its background work and closes
// the driver. Calls after Close fail with ErrClosed. A later Close waits for
// the first to finish and returns its result, or ctx's cause when ctx ends
// first.
//
// The locks' contexts are cancelled (cause ErrClosed) before they are
// released in the store. Store attempts in flight are cancelled (an
// in-process store's are short and run to their end); Close waits for
// them, and for the releases, handovers and Extends in flight (bounded by
// ctx), while it releases the held locks, so that the driver is not closed
// under them and a lock an attempt got is released before it closes.
func (m *Mutex) Close(ctx context.Context) error {
	m.mustBuilt()
	mustCtx(ctx)
	m.mu.Lock()
	if done := m.closeDone; done != nil {
		m.mu.Unlock()
		select {
		case <-done:
			return m.closeErr
		default:
		}
		select {
		case <-done:
			return m.closeErr
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	done := make(chan struct{})
	m.closeDone = done
	finished := false
	defer func() {
		// Even when shutdown panics (a driver's Release or Close did), the
		// later calls are not left waiting; they report the panic.
		if !finished {
			m.closeErr = errClosePanicked
		}
		close(done)
	}()
	err := m.shutdown(ctx)
	m.closeErr = err // read by later calls once done is closed
	finished = true
	return err
}

// errClosePanicked is what a later Close returns when the first panicked.
var errClosePanicked = errors.New("mutex: the first Close panicked")

// shutdown is the first Close's work; it is entered with m.mu held.
func (m *Mutex) shutdown(ctx context.Context) error {
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
	m.cancelAttempts()
	var settled chan struct{}
	if m.calls > 0 {
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
	m.wg.Wait() // renewals and subscribing end at once; cleanups within attemptGrace, or as ctx ends
	stop()
	m.cleanupsCancel()
	m.mu.Lock()
	unsub := m.unsub
	m.unsub = nil
	m.mu.Unlock()
	if unsub != nil {
		unsub()
	}
	m.tel.close() // no lock is held or waited for any more
	if err := m.drv.Close(ctx); err != nil {
		return m.driverError("close", "", err)
	}
	return nil
}

// countInProcess counts the attempt the caller, holding m.mu and having
// found the Mutex open, is about to make when the store is in process
// (attempt ends the count); calls to other stores are counted by
// beginAttempt. Counting in the caller's hold costs an uncontended
// acquisition no hold of its own.
func (m *Mutex) countInProcess() {
	if m.feat.InProcess {
		m.calls++
	}
}

// endCall ends what a m.calls++ under m.mu (countInProcess, beginAttempt,
// Release, Extend) counted.
func (m *Mutex) endCall() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.endCallLocked()
}

// endCallLocked is endCall with m.mu held.
func (m *Mutex) endCallLocked() {
	m.calls--
	if m.calls == 0 && m.settled != nil {
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
