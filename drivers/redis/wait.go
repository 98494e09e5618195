package redis

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/kit"
	"github.com/mutexfx/mutexfx/internal/bubble"
)

// endedMemory is how long a driver remembers a waiting call that returned
// without the lock, so as to release a lock handed to it late. A release
// hands a lock only to a waiter that tried within WaiterLiveness, so a
// hand-off comes at most that long after the call's last attempt, plus the
// message's delivery.
const endedMemory = time.Minute

// watchers wakes the waiting Acquire calls of a key when a release message
// for them is heard, and hands them the locks passed to them.
type watchers struct {
	mu     sync.Mutex
	byKey  map[string]*watch     // the first of each key's calls, linked by next
	ended  map[attempt]time.Time // waiting calls that returned without the lock, and when
	pruned time.Time             // last sweep of ended
	once   sync.Once             // starts the driver's own subscription
}

// attempt names the waiting call of one token for one key.
type attempt struct{ key, token string }

// watch is one waiting Acquire call. Watches are pooled (unless
// bubble.Unpooled: a channel made in a synctest bubble stays in it): most
// calls get the lock at their first attempt and never wait.
type watch struct {
	token      string
	wake       chan struct{} // buffered 1: look again
	fence      uint64        // set (under watchers.mu) when a release handed the lock to token
	prev, next *watch        // the key's other calls (under watchers.mu)
}

var watchPool = sync.Pool{New: newWatch}

func newWatch() any { return &watch{wake: make(chan struct{}, 1)} }

// granted returns the fence of a lock handed to w, or 0.
func (d *Driver) granted(w *watch) uint64 {
	d.watchers.mu.Lock()
	defer d.watchers.mu.Unlock()
	return w.fence
}

// acquireWaiting retries the acquire script, queued for its turn, until it
// gets the lock, req.Wait passes or ctx ends (then it answers not acquired
// with the last result and no error). A release may hand it the lock
// directly (its message carries the fence: no round trip of our own). It
// registers for messages before its first attempt, so that a release
// between that attempt and the wait is not missed; on its way out it
// unregisters its token in Redis (leave), so that no release hands a lock
// to a call that has returned; should that fail, a lock handed to it all
// the same is released when its message comes (see message).
func (d *Driver) acquireWaiting(ctx context.Context, req drivers.AcquireRequest) (res drivers.AcquireResult, err error) {
	pace := kit.NewPacer(req.Wait)
	defer pace.Stop()
	w := d.watch(req.Key, req.Token)
	defer func() { d.unwatch(req, w, res.Acquired) }()
	for attempt := 0; ; attempt++ {
		res, err = d.acquireOnce(ctx, req, true)
		if err != nil {
			d.leaveLater(req)
			return res, err
		}
		if res.Acquired && attempt > 0 {
			return d.confirmHandoff(ctx, req, res) // it may have been handed over
		}
		if res.Acquired {
			return res, nil
		}
		tick, ok := pace.After(kit.PollDelay(res.HolderTTL))
		if !ok {
			return d.leaveNow(ctx, req, res)
		}
		select {
		case <-w.wake:
			if f := d.granted(w); f != 0 {
				return d.confirmHandoff(ctx, req, drivers.AcquireResult{Acquired: true, Fence: f})
			}
		case <-tick:
		case <-ctx.Done():
			d.leaveLater(req)
			return res, nil
		}
	}
}

// leaveNow ends a wait whose time is up: the lock when a release handed it
// over meanwhile, else last (not acquired).
func (d *Driver) leaveNow(ctx context.Context, req drivers.AcquireRequest, last drivers.AcquireResult) (drivers.AcquireResult, error) {
	res, err := d.leave(ctx, req, false, true)
	if err != nil {
		d.leaveLater(req)
		return last, nil
	}
	if !res.Acquired {
		return last, nil
	}
	return d.confirmHandoff(ctx, req, res)
}

// leaveLater unregisters req's token and takes its waiter out of the
// queue, in the background, after its call ended without the lock (ctx
// ended, or the store failed), releasing a lock handed to it meanwhile
// (passing it on). It runs past the health gate (the
// store error that ended the call marked the key's server down), and once
// more when that server answers again if that failed. Best effort, bounded by
// DefaultCommandTimeout; a lock handed over that this cannot release
// expires after req.TTL (unless its message comes: see message). Close
// waits for it.
func (d *Driver) leaveLater(req drivers.AcquireRequest) {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return
	}
	d.wg.Add(1)
	d.mu.Unlock()
	go func() {
		defer d.wg.Done()
		ctx, cancel := context.WithTimeout(d.ctx, DefaultCommandTimeout)
		defer cancel()
		if _, err := d.leave(ctx, req, true, false); err == nil {
			return
		}
		if n, _ := d.health.node(ctx, tag(req.Key)); n.wait(ctx) == nil {
			_, _ = d.leave(ctx, req, true, false)
		}
	}()
}

// watch registers a waiting call for key and makes sure the driver hears
// its release messages.
func (d *Driver) watch(key, token string) *watch {
	ws := &d.watchers
	ws.once.Do(func() {
		// The driver's own listener; it lives until Close.
		_, _ = d.Subscribe(d.ctx, func(drivers.Event) {})
	})
	var w *watch
	if bubble.Unpooled.Load() {
		w = newWatch().(*watch)
	} else {
		w = watchPool.Get().(*watch)
	}
	w.token = token
	ws.mu.Lock()
	delete(ws.ended, attempt{key, token})
	if ws.byKey == nil {
		ws.byKey = map[string]*watch{}
	}
	if w.next = ws.byKey[key]; w.next != nil {
		w.next.prev = w
	}
	ws.byKey[key] = w
	ws.mu.Unlock()
	return w
}

// unwatch ends the waiting call w for req (w is recycled). A call that
// returns without the lock is remembered for endedMemory (see message); it
// has started leaveLater, which also releases a lock handed to it before
// it returned.
func (d *Driver) unwatch(req drivers.AcquireRequest, w *watch, acquired bool) {
	ws := &d.watchers
	ws.mu.Lock()
	defer ws.mu.Unlock()
	switch {
	case w.prev != nil:
		w.prev.next = w.next
	case w.next != nil:
		ws.byKey[req.Key] = w.next
	default:
		delete(ws.byKey, req.Key)
	}
	if w.next != nil {
		w.next.prev = w.prev
	}
	select {
	case <-w.wake:
	default:
	}
	if !bubble.Unpooled.Load() {
		*w = watch{wake: w.wake}
		watchPool.Put(w)
	}
	if acquired {
		return
	}
	now := time.Now()
	if ws.ended == nil {
		ws.ended = map[attempt]time.Time{}
	}
	if now.Sub(ws.pruned) > endedMemory {
		for a, at := range ws.ended {
			if now.Sub(at) > endedMemory {
				delete(ws.ended, a)
			}
		}
		ws.pruned = now
	}
	ws.ended[attempt{req.Key, req.Token}] = now
}

// message handles a release message (see queueLua for the format): it
// hands a lock passed on to its waiting call, or wakes the waiting calls
// of the key. A lock passed to a call that returned without it (its token
// could not be unregistered: the store failed) is released at once, in
// the background (leaveLater), passing it on. It returns the key, and
// false for a malformed message.
func (d *Driver) message(payload string) (string, bool) {
	key, token, fence, ok := parseMessage(payload)
	if !ok {
		return "", false
	}
	ws := &d.watchers
	ws.mu.Lock()
	found := false
	for w := ws.byKey[key]; w != nil; w = w.next {
		if fence != 0 {
			if w.token != token {
				continue
			}
			w.fence = fence
			found = true
		}
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
	a := attempt{key, token}
	_, orphan := ws.ended[a]
	orphan = orphan && fence != 0 && !found
	if orphan {
		delete(ws.ended, a)
	}
	ws.mu.Unlock()
	if orphan {
		d.leaveLater(drivers.AcquireRequest{Key: key, Token: token})
	}
	return key, true
}

// parseMessage reads "w<key>" (fence 0) or "g<fence>,<token length>,<token><key>".
func parseMessage(p string) (key, token string, fence uint64, ok bool) {
	if p == "" {
		return "", "", 0, false
	}
	switch p[0] {
	case 'w':
		return p[1:], "", 0, true
	case 'g':
		fs, rest, ok1 := strings.Cut(p[1:], ",")
		ls, rest, ok2 := strings.Cut(rest, ",")
		f, err1 := strconv.ParseUint(fs, 10, 64)
		n, err2 := strconv.Atoi(ls)
		if !ok1 || !ok2 || err1 != nil || err2 != nil || f == 0 || n < 0 || n > len(rest) {
			return "", "", 0, false
		}
		return rest[n:], rest[:n], f, true
	}
	return "", "", 0, false
}
