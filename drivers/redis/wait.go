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
	pruned time.Time             // last sweep of ended and early
	// early are the locks handed to calls not watching (yet): a call
	// registers only after its first attempt failed, and a release may
	// hand it the lock before that. watch takes them.
	early map[attempt]grant
	// since is when the server last confirmed the driver's subscription
	// (subscribed): a call whose first attempt started before may have
	// missed its message.
	since time.Time
	once  sync.Once // starts the driver's own subscription
}

// grant is a lock handed to a call before it watched: its fence, and when
// the message came.
type grant struct {
	fence uint64
	at    time.Time
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
// directly (its message carries the fence: no round trip of our own).
// The first attempt sets nothing up (most find the lock free): only when
// it did not get the lock does the call register for messages (watch),
// which picks up a lock handed to it since that attempt (see message). On
// its way out it unregisters its token in Redis (leave), so that no
// release hands a lock to a call that has returned; should that fail, a
// lock handed to it all the same is released when its message comes (see
// message).
func (d *Driver) acquireWaiting(ctx context.Context, req drivers.AcquireRequest) (res drivers.AcquireResult, err error) {
	d.listen()
	start := time.Now()
	res, err = d.acquireOnce(ctx, req, true)
	switch {
	case err != nil:
		d.forgetCall(req)
		d.leaveLater(req)
		return res, err
	case res.Acquired:
		return res, nil
	}
	pace := kit.NewPacerFrom(start, req.Wait)
	defer pace.Stop()
	w := d.watch(req.Key, req.Token, start)
	defer func() { d.unwatch(req, w, res.Acquired) }()
	for {
		tick, ok := pace.After(kit.PollDelay(res.HolderTTL, d.poll))
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
		res, err = d.acquireOnce(ctx, req, true)
		if err != nil {
			d.leaveLater(req)
			return res, err
		}
		if res.Acquired {
			return d.confirmHandoff(ctx, req, res) // it may have been handed over
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

// listen makes sure the driver hears its release messages: its own
// listener, started by the first waiting call, lives until Close.
func (d *Driver) listen() {
	d.watchers.once.Do(func() {
		_, _ = d.Subscribe(d.ctx, func(drivers.Event) {})
	})
}

// watch registers a waiting call for key, whose first attempt, started at
// start, did not get the lock. A lock handed to it since then is its at
// once (w.fence set, w woken); a subscription confirmed since then wakes
// it (see subscribed).
func (d *Driver) watch(key, token string, start time.Time) *watch {
	ws := &d.watchers
	var w *watch
	if bubble.Unpooled.Load() {
		w = newWatch().(*watch)
	} else {
		w = watchPool.Get().(*watch)
	}
	w.token = token
	ws.mu.Lock()
	a := attempt{key, token}
	delete(ws.ended, a)
	if g, ok := ws.early[a]; ok {
		delete(ws.early, a)
		w.fence = g.fence
		w.signal()
	} else if !ws.since.Before(start) {
		w.signal()
	}
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
	if !acquired {
		ws.endedLocked(req)
	}
}

// forgetCall remembers a waiting call that returned without the lock
// before it watched (its first attempt failed), as unwatch does.
func (d *Driver) forgetCall(req drivers.AcquireRequest) {
	ws := &d.watchers
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.endedLocked(req)
}

// endedLocked remembers req's call as returned without the lock, for
// endedMemory (see message), and forgets what is older; ws.mu held.
func (ws *watchers) endedLocked(req drivers.AcquireRequest) {
	now := time.Now()
	if ws.ended == nil {
		ws.ended = map[attempt]time.Time{}
	}
	ws.prune(now)
	ws.ended[attempt{req.Key, req.Token}] = now
}

// prune forgets the ended calls and early grants older than endedMemory,
// at most once per endedMemory; ws.mu held.
func (ws *watchers) prune(now time.Time) {
	if now.Sub(ws.pruned) <= endedMemory {
		return
	}
	for a, at := range ws.ended {
		if now.Sub(at) > endedMemory {
			delete(ws.ended, a)
		}
	}
	for a, g := range ws.early {
		if now.Sub(g.at) > endedMemory {
			delete(ws.early, a)
		}
	}
	ws.pruned = now
}

// message handles a release message (see queueLua for the format): it
// hands a lock passed on to its waiting call, or wakes the waiting calls
// of the key. A lock passed to a call that returned without it (its token
// could not be unregistered: the store failed) is released at once, in
// the background (leaveLater), passing it on. A lock passed to a call
// that does not watch yet (its first attempt just failed) is kept for its
// watch (a message for a call that got the lock by its own attempt
// meanwhile is forgotten after endedMemory). It returns the key, and false
// for a malformed message.
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
		w.signal()
	}
	a := attempt{key, token}
	_, orphan := ws.ended[a]
	orphan = orphan && fence != 0 && !found
	switch {
	case orphan:
		delete(ws.ended, a)
	case fence != 0 && !found:
		now := time.Now()
		if ws.early == nil {
			ws.early = map[attempt]grant{}
		}
		ws.prune(now)
		ws.early[a] = grant{fence, now}
	}
	ws.mu.Unlock()
	if orphan {
		d.leaveLater(drivers.AcquireRequest{Key: key, Token: token})
	}
	return key, true
}

// subscribed runs each time the server confirms the driver's subscription:
// the first time, and after every reconnection (go-redis subscribes
// again). A release message published before that was lost, so every
// waiting call looks again at once (one attempt: a lock handed to its
// token meanwhile is then its own, as the acquire script returns it), and
// so does a call whose first attempt started before but that does not
// watch yet (watch).
func (d *Driver) subscribed() {
	ws := &d.watchers
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.since = time.Now()
	for _, first := range ws.byKey {
		for w := first; w != nil; w = w.next {
			w.signal()
		}
	}
}

// signal wakes w's call, if it is not woken already; watchers.mu held.
func (w *watch) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
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
