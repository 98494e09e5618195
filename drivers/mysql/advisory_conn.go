package mysql

import (
	"context"
	"database/sql"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
)

// Up to keepConns connections are kept between acquisitions, each for up
// to keepFor (dbconn.Keeper), rather than go through the pool, whose
// liveness check (a read system call per hand-out) costs about 4% of an
// acquire+release pair. One found dead is replaced.
const (
	keepConns = 2
	keepFor   = time.Second
)

// The driver's own statements on a held lock's connection (checks on a
// full pool, idle touches) run in goroutines whose context ends only when
// Close starts: ending a statement closes its connection, freeing the
// lock, so no caller's deadline may end it. A release that cannot wait, or
// a lock found lost, ends such a check (heldLock.abort) or has the
// connection's user drop it (unlock).

// check asks h's own connection whether it still holds h (h.mu held).
func (h *heldLock) check(ctx context.Context) (bool, error) {
	h.used.Store(time.Now().UnixNano())
	var ok sql.NullBool
	err := h.conn.QueryRow(ctx, "SELECT IS_USED_LOCK(?) = CONNECTION_ID()", []any{h.name}, &ok)
	return err == nil && ok.Valid && ok.Bool, err
}

// ownAnswer is checkOwn's answer: held, or why it could not ask.
type ownAnswer struct {
	held bool
	err  error
}

// checkOwn checks h on its own connection in a goroutine, reporting it
// lost when not held. With wait nil it asks only if the connection is free
// (else nil); otherwise it waits for it until wait ends (answering wait's
// error). Nil when the driver is closing.
func (a *advisoryDriver) checkOwn(h *heldLock, wait context.Context) <-chan ownAnswer {
	if wait == nil && !h.mu.TryLock() {
		return nil
	}
	a.mu.Lock()
	if a.life.Closed() {
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
			if err := h.mu.LockContext(wait, a.life.Closing()); err != nil {
				out <- ownAnswer{err: err}
				return
			}
		}
		defer a.unlock(h)
		ctx, cancel := context.WithCancel(a.life.Closing())
		defer cancel()
		h.abort.Store(&cancel)
		defer h.abort.Store(nil)
		if h.done || h.giveUp.Load() { // (a release that gave up may have missed abort)
			out <- ownAnswer{}
			return
		}
		ok, _ := h.check(ctx)
		if !ok && ctx.Err() == nil {
			a.dropLocked(h, true)
		}
		out <- ownAnswer{held: ok}
	}()
	return out
}

// abandon has h's busy connection dropped when its user is done (unlock),
// or at once if it is checkOwn (abort); true: h.mu was freed meanwhile,
// and the caller now holds it.
func (h *heldLock) abandon() bool {
	h.giveUp.Store(true)
	if stop := h.abort.Load(); stop != nil {
		(*stop)()
	}
	return h.mu.TryLock()
}

// unlock frees h.mu after a use of h's connection, first dropping it (no
// Lost event: the holder let go) if a release gave up meanwhile.
func (a *advisoryDriver) unlock(h *heldLock) {
	if h.giveUp.Load() {
		a.dropLocked(h, false)
	}
	h.mu.Unlock()
}

// probeOwnAll checks each of hs on its own connection (checkOwn) and
// waits for the answers until ctx ends: renewals on a full pool.
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

// lose reports h lost, then drops its connection (dropLocked); a busy
// one is dropped when its statement ends (abandon).
func (a *advisoryDriver) lose(h *heldLock) {
	if !h.mu.TryLock() {
		a.forget(h)
		a.tellLost(h)
		if !h.abandon() { // its user drops it when done (unlock)
			return
		}
	}
	a.dropLocked(h, true)
	h.mu.Unlock()
}

// tellLost sends h's Lost event, once.
func (a *advisoryDriver) tellLost(h *heldLock) {
	if h.lostSent.CompareAndSwap(false, true) {
		a.subs.Publish(drivers.Event{Kind: drivers.Lost, Key: h.key, Token: h.token})
	}
}
