package redis

import (
	"context"
	"sync"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
)

// Waiting in the store (Features.BlockingWait).
const (
	// WaitPollInterval is how often a waiting Acquire retries when no
	// release message wakes it; each retry also proves the waiter alive.
	WaitPollInterval = 100 * time.Millisecond
	// WaiterLiveness is how long a queued waiter keeps its turn without
	// retrying: a waiter that crashed or gave up delays the others by at
	// most this long.
	WaiterLiveness = 400 * time.Millisecond
)

// watchers wakes the waiting Acquire calls of a key when its release is
// heard.
type watchers struct {
	mu    sync.Mutex
	byKey map[string]map[chan struct{}]struct{}
	once  sync.Once // starts the driver's own subscription
}

// acquireWaiting retries the acquire script, queued for its turn, until it
// gets the lock, req.Wait passes or ctx ends (then it answers not acquired
// with the last result and no error).
func (d *Driver) acquireWaiting(ctx context.Context, req drivers.AcquireRequest) (drivers.AcquireResult, error) {
	deadline := time.Now().Add(req.Wait)
	wake := d.watch(req.Key)
	defer d.unwatch(req.Key, wake)
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for {
		res, err := d.acquireOnce(ctx, req, true)
		if err != nil || res.Acquired {
			return res, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return res, nil
		}
		delay := min(left, WaitPollInterval)
		if res.HolderTTL > 0 && res.HolderTTL < delay {
			delay = res.HolderTTL + time.Millisecond
		}
		timer.Reset(delay)
		select {
		case <-wake:
			if !timer.Stop() {
				<-timer.C
			}
		case <-timer.C:
		case <-ctx.Done():
			return res, nil
		}
	}
}

// watch registers a wake-up channel for key and makes sure the driver
// hears releases.
func (d *Driver) watch(key string) chan struct{} {
	w := &d.watchers
	w.once.Do(func() {
		// The driver's own listener; it lives until Close.
		_, _ = d.Subscribe(d.ctx, func(drivers.Event) {})
	})
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	if w.byKey == nil {
		w.byKey = map[string]map[chan struct{}]struct{}{}
	}
	if w.byKey[key] == nil {
		w.byKey[key] = map[chan struct{}]struct{}{}
	}
	w.byKey[key][ch] = struct{}{}
	w.mu.Unlock()
	return ch
}

func (d *Driver) unwatch(key string, ch chan struct{}) {
	w := &d.watchers
	w.mu.Lock()
	delete(w.byKey[key], ch)
	if len(w.byKey[key]) == 0 {
		delete(w.byKey, key)
	}
	w.mu.Unlock()
}

// wake wakes the waiting Acquire calls of key.
func (d *Driver) wake(key string) {
	w := &d.watchers
	w.mu.Lock()
	for ch := range w.byKey[key] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	w.mu.Unlock()
}
