package component

import (
	"context"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"go.uber.org/zap"
)

// Subscribing to the store's events (wake-ups on release, lost locks) runs
// in the background, owned by the Mutex (Close cancels and waits for it):
// no acquisition waits for it, so a store that is slow to subscribe or
// down holds up neither TryAcquire nor a waiter's first attempt. What
// happened before the subscription was in place may have gone unseen, so
// once subscribed the Mutex catches up: every queue's first waiter looks
// again (a release's wake-up may have been missed), and every lock whose
// last acquire or renewal call started before is renewed at once (a loss
// may have been missed; a renewal finds it): see Mutex.renewed. A driver
// whose Subscribe returns before its store has the subscription (Redis)
// catches up its own blocking waits (Features.BlockingWait) when the store
// confirms it, the first time and after every reconnection: a queue's
// first waiter waits there, so nothing more is needed here.

// subscribeLocked starts subscribing to the store's events, once; m.mu
// held and the Mutex not closed. After a failure it tries again at a later
// acquisition, 30 s later at the soonest; waiters poll meanwhile.
func (m *Mutex) subscribeLocked() {
	if m.subbed || m.subbing {
		return
	}
	sub, ok := m.drv.(drivers.Subscriber)
	if !ok {
		m.subbed = true
		return
	}
	if time.Now().Before(m.subRetry) {
		return
	}
	m.subbing = true
	m.wg.Go(func() { m.subscribeStore(sub) })
}

// subscribeStore subscribes to sub's events, for subscribeLocked.
func (m *Mutex) subscribeStore(sub drivers.Subscriber) {
	ctx, cancel := context.WithTimeout(m.closing, attemptGrace)
	unsub, err := sub.Subscribe(ctx, m.onEvent)
	cancel()

	m.mu.Lock()
	m.subbing = false
	closed := m.closed
	if err != nil {
		m.subRetry = time.Now().Add(30 * time.Second)
	} else {
		m.unsub = unsub // Close cancels it, after waiting for this goroutine
		m.subbed = true
		now := time.Now()
		m.subSince = now
		for name := range m.queues {
			m.wakeHead(name)
		}
		for _, l := range m.held {
			// (one in flight is renewed again when it ends: renewed)
			if l.state == stateHeld && l.inflight == nil {
				l.due = now
				m.wakeFor(l)
			}
		}
	}
	m.mu.Unlock()
	switch {
	case closed:
	case err != nil:
		m.log.Warn("mutex store wake-ups unavailable, polling", zap.Error(err))
	default:
		m.log.Debug("mutex store wake-ups subscribed")
	}
}

// onEvent handles a store event.
func (m *Mutex) onEvent(e drivers.Event) {
	name, ok := m.nameOf(e.Key)
	if !ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch e.Kind {
	case drivers.Released:
		m.wakeHead(name)
	case drivers.Lost:
		if l := m.held[name]; l != nil && l.token == e.Token {
			m.lose(l, CauseStoreReported, "the store reported it lost")
		} else {
			m.lostEarly(e.Token)
		}
	}
}
