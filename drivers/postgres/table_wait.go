package postgres

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/kit"
)

// Waiting in table mode (Features.BlockingWait): in the row's queue, woken
// by the NOTIFY of a release.
const (
	// WaitPollInterval is drivers.WaitPollInterval: how often a waiting
	// Acquire retries in table mode when no NOTIFY wakes it; each retry
	// also keeps its place in the row's waiter queue.
	WaitPollInterval = drivers.WaitPollInterval
	// WaiterLiveness is drivers.WaiterLiveness: how long a queued waiter
	// keeps its turn in the row's queue without retrying.
	WaiterLiveness = drivers.WaiterLiveness
	// deferRetry: see queueDeferral.
	deferRetry = 300 * time.Microsecond
)

// queueDeferral is how long a waiting Acquire that finds the row free for a
// queued driver puts off queueing (retrying every deferRetry): a driver
// that has just released a lock and at once waits for it again would
// otherwise queue at the very moment the next driver takes the row, and
// make it wait for its commit. A variable for the tests.
var queueDeferral = 10 * time.Millisecond

// watchers wakes the waiting Acquire calls of a key when its release is
// heard.
type watchers struct {
	mu    sync.Mutex
	byKey map[string][]chan struct{}
}

// acquireWaiting retries the acquisition, queued in the row for its
// turn, until it gets the lock, req.Wait passes or ctx ends (then it answers
// not acquired with the last result and no error). It registers for
// wake-ups before its first attempt, so that a release between that attempt
// and the wait is not missed.
func (d *tableDriver) acquireWaiting(ctx context.Context, req drivers.AcquireRequest) (drivers.AcquireResult, error) {
	pace := kit.NewPacer(req.Wait)
	defer pace.Stop()
	wake := d.watch(req.Key)
	defer d.unwatch(req.Key, wake)
	deferUntil := time.Now().Add(queueDeferral)
	for fast := true; ; fast = false {
		// the first attempt tries the uncontended path; once the lock was
		// taken, attempts go straight to the queueing statement
		o := attemptOpts{queue: true, fast: fast, deferQueue: time.Now().Before(deferUntil)}
		res, deferred, err := d.acquireOnce(ctx, req, o)
		if err != nil || res.Acquired {
			return res, err
		}
		delay := kit.PollDelay(res.HolderTTL)
		if deferred {
			delay = deferRetry
		}
		tick, ok := pace.After(delay)
		if !ok {
			return res, nil
		}
		select {
		case <-wake:
		case <-tick:
		case <-ctx.Done():
			return res, nil
		}
	}
}

// watch registers a wake-up channel for key and makes sure the driver
// listens for releases.
func (d *tableDriver) watch(key string) chan struct{} {
	d.mu.Lock()
	d.startListenerLocked()
	d.mu.Unlock()
	ch := make(chan struct{}, 1)
	d.watchers.mu.Lock()
	defer d.watchers.mu.Unlock()
	d.watchers.byKey[key] = append(d.watchers.byKey[key], ch)
	return ch
}

func (d *tableDriver) unwatch(key string, ch chan struct{}) {
	w := &d.watchers
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.byKey[key] = slices.DeleteFunc(w.byKey[key], func(c chan struct{}) bool { return c == ch }); len(w.byKey[key]) == 0 {
		delete(w.byKey, key)
	}
}

// wake wakes the waiting Acquire calls of key.
func (d *tableDriver) wake(key string) {
	d.watchers.mu.Lock()
	defer d.watchers.mu.Unlock()
	for _, ch := range d.watchers.byKey[key] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
