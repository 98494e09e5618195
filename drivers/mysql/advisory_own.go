package mysql

import (
	"context"
	"database/sql"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
)

// Statements the driver runs by itself on a held lock's own connection —
// the monitor's checks when the pool is full, its touches (advisory_idle.go), a
// renewal's checks when the pool is full — run in goroutines of their own,
// with a context that ends only with Close (advisory.bg). Ending a
// statement on the holder's connection closes it, which frees the lock:
// so neither a caller's deadline (a renewal's, bounded well before the
// lock's expiry) nor a stall ends it, and the monitor and the renewal do
// not wait for it either: a stall on one lock's connection holds up
// nothing else, and a renewal returns by its deadline. A renewal that gets
// no answer in time fails (renewFailed); the check goes on, and reports
// the lock lost if it finds it so. A release that cannot wait for the
// connection any longer ends such a check (heldLock.abort), or has
// whoever else uses the connection drop it when done (unlock); so does a
// lock found lost meanwhile (lose), whose Lost event goes out at once.

// check asks h's own connection whether it still holds h (h.mu held). Any
// statement on that connection also restarts the server's count of its
// idle time (advisory_idle.go).
func (h *heldLock) check(ctx context.Context) (bool, error) {
	h.used.Store(time.Now().UnixNano())
	var ok sql.NullBool
	err := h.conn.queryRow(ctx, "SELECT IS_USED_LOCK(?) = CONNECTION_ID()", []any{h.name}, &ok)
	return err == nil && ok.Valid && ok.Bool, err
}

// ownAnswer is what checkOwn found: whether the lock is held, or why it
// could not ask.
type ownAnswer struct {
	held bool
	err  error
}

// checkOwn asks h's own connection, in a goroutine, whether it still holds
// h (heldLock.check, which also counts as the connection's use), and
// reports h lost when it does not (unless the driver is closing). With
// wait nil it asks only if nobody uses the connection now, and returns nil
// otherwise (a statement runs there, or is about to); else it waits for
// the connection until wait ends (the answer then is wait's error). It
// returns nil too when the driver is closing. The answer comes on the
// channel returned.
func (a *advisoryDriver) checkOwn(h *heldLock, wait context.Context) <-chan ownAnswer {
	if wait == nil && !h.mu.TryLock() {
		return nil
	}
	a.mu.Lock()
	if a.bgClosed {
		a.mu.Unlock()
		if wait == nil {
			h.mu.Unlock()
		}
		return nil
	}
	a.bgWG.Add(1)
	a.mu.Unlock()
	out := make(chan ownAnswer, 1)
	go func() {
		defer a.bgWG.Done()
		if wait != nil {
			if err := h.mu.LockContext(wait, a.bg); err != nil {
				out <- ownAnswer{err: err}
				return
			}
		}
		defer a.unlock(h)
		ctx, cancel := context.WithCancel(a.bg)
		defer cancel()
		h.abort.Store(&cancel)
		defer h.abort.Store(nil)
		if h.done || h.giveUp.Load() { // (a release that gave up may have missed abort)
			out <- ownAnswer{}
			return
		}
		ok, _ := h.check(ctx)
		if !ok && ctx.Err() == nil {
			a.loseLocked(h)
		}
		out <- ownAnswer{held: ok}
	}()
	return out
}

// unlock frees h.mu, held by a call that used h's connection. When a
// release gave up waiting for it meanwhile, it drops the connection first
// (the server frees the lock), without a Lost event: the holder let the
// lock go.
func (a *advisoryDriver) unlock(h *heldLock) {
	if h.giveUp.Load() {
		a.dropLocked(h)
	}
	h.mu.Unlock()
}

// probeOwnAll asks each of hs on its own connection (checkOwn), all at
// once, and waits for their answers until ctx ends: a renewal when the
// pool has no connection to spare.
func (a *advisoryDriver) probeOwnAll(ctx context.Context, hs []*heldLock) (held []bool, errs []error) {
	held = make([]bool, len(hs))
	errs = make([]error, len(hs))
	answers := make([]<-chan ownAnswer, len(hs))
	for i, h := range hs {
		answers[i] = a.checkOwn(h, ctx)
	}
	for i, ch := range answers {
		if ch == nil {
			errs[i] = ErrClosed
			continue
		}
		select {
		case ans := <-ch:
			held[i], errs[i] = ans.held, ans.err
		case <-ctx.Done():
			errs[i] = context.Cause(ctx)
		}
	}
	return held, errs
}

// stopBackground ends the statements checkOwn runs (closing their
// connections, whose locks Close drops anyway) and waits for them.
func (a *advisoryDriver) stopBackground() {
	a.mu.Lock()
	a.bgClosed = true
	a.mu.Unlock()
	a.stopBg()
	a.bgWG.Wait()
}

// lose marks h lost (its connection broke or no longer holds the lock, or
// the driver gives it up): forgets it, tells the subscribers, then drops
// its connection — in that order, so that when the server still holds the
// lock its holder is told before anyone else can get it.
//
// It never waits for the connection: when a statement runs there (one
// stalled on the link), the Lost event goes out now, and the connection
// is dropped when that statement ends (unlock), or at once if it is a
// check of the driver's own (abort).
func (a *advisoryDriver) lose(h *heldLock) {
	if !h.mu.TryLock() {
		a.forget(h)
		a.tellLost(h)
		h.giveUp.Store(true)
		if stop := h.abort.Load(); stop != nil {
			(*stop)()
		}
		if !h.mu.TryLock() { // its user drops it when done (unlock)
			return
		}
	}
	a.loseLocked(h)
	h.mu.Unlock()
}

func (a *advisoryDriver) loseLocked(h *heldLock) {
	if h.done {
		return
	}
	h.done = true
	a.forget(h)
	a.tellLost(h)
	discard(h.conn.conn)
}

// tellLost sends h's Lost event, once.
func (a *advisoryDriver) tellLost(h *heldLock) {
	if h.lostSent.CompareAndSwap(false, true) {
		a.subs.Publish(drivers.Event{Kind: drivers.Lost, Key: h.key, Token: h.token})
	}
}
