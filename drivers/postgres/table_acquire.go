package postgres

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/kit"
	"github.com/mutexfx/mutexfx/drivers/internal/sqlkit"
)

// attemptOpts are the ways acquireOnce tries.
type attemptOpts struct {
	queue      bool      // a failed attempt queues this driver in the row (or refreshes its entry)
	fast, turn bool      // try take first; or the turn statement (a waiter a release woke)
	deferQueue bool      // do not queue while the row is free for a queued driver (reported deferred)
	arrival    *float64  // server clock (ms) at a waiting call's first acquire statement (set by attempt)
	pid        any       // the listener backend a queued entry registers (grants)
	due        time.Time // when the entry's next stamp is due (zero: none)
}

// take is the uncontended path: one UPDATE takes the row when it is free
// and nobody queues for it (with turn: when it is this driver's turn).
func (d *tableDriver) take(ctx context.Context, req drivers.AcquireRequest, ms int64, turn bool) (fence uint64, took bool, err error) {
	id := sqlkit.KeyHash(req.Key)
	took, err = d.queryRow(ctx, func(p querier) (string, []any) {
		if turn {
			fs, args := d.fencing(p, id, req.Token, ms, d.id, WaiterLiveness.Milliseconds())
			return fs.turn, args
		}
		fs, args := d.fencing(p, id, req.Token, ms)
		return fs.take, args
	}, &fence, nil)
	return fence, took, err
}

// acquireOnce makes an attempt. When the link failed after a statement was
// sent, it may have taken the lock (dropping the queue entry) before its
// answer was lost: the row is read back, and the lock returned if
// req.Token holds it (an error would send the caller to the queue's back).
func (d *tableDriver) acquireOnce(ctx context.Context, req drivers.AcquireRequest, o *attemptOpts) (drivers.AcquireResult, bool, error) {
	ms, err := ttlMillis(req.TTL)
	if err != nil {
		return drivers.AcquireResult{}, false, err
	}
	res, deferred, err := d.attempt(ctx, req, ms, o)
	var pe *pgconn.PgError
	if err == nil || ctx.Err() != nil || errors.As(err, &pe) || pgconn.SafeToRetry(err) {
		return res, deferred, err // answered, or nothing sent
	}
	if info, held, ierr := d.Inspect(ctx, req.Key); ierr == nil && held && info.Token == req.Token && info.Fence != 0 {
		return drivers.AcquireResult{Acquired: true, Fence: info.Fence}, false, nil
	}
	return res, deferred, err
}

// attempt inserts the row, or takes a free one when no live waiter queued
// before this driver, in one statement returning the fence or the holder's
// remaining ttl (ms: req.TTL); after take when o.fast or o.turn.
func (d *tableDriver) attempt(ctx context.Context, req drivers.AcquireRequest, ms int64, o *attemptOpts) (res drivers.AcquireResult, deferred bool, err error) {
	if o.fast || o.turn {
		fence, took, err := d.take(ctx, req, ms, o.turn)
		if err != nil || took {
			return drivers.AcquireResult{Acquired: took, Fence: fence}, false, err
		}
	}
	live := WaiterLiveness.Milliseconds()
	o.due = time.Time{}
	err = d.run(ctx, func(ctx context.Context, p querier) error {
		var left, now float64
		var stamp *float64
		start := time.Now() // never after the statement's now()
		fs, args := d.fencing(p, sqlkit.KeyHash(req.Key), shownName(req.Key), req.Token, ms, d.id, o.queue, live, o.deferQueue, o.arrival, o.pid)
		err := p.QueryRow(ctx, fs.acquire, args...).
			Scan(&res.Acquired, &res.Fence, &left, &deferred, &now, &stamp)
		if err == nil && o.arrival == nil {
			o.arrival = &now
		}
		if err == nil && stamp != nil {
			// the entry is rewritten by the first attempt at least
			// WaiterLiveness/4 after its stamp: make one restamp after
			o.due = start.Add(time.Duration((*stamp-now)*float64(time.Millisecond)) + restamp)
		}
		if errors.Is(err, pgx.ErrNoRows) {
			// the holder's row, inserted concurrently, is not in the snapshot
			res, deferred = drivers.AcquireResult{}, false
			return nil
		}
		res.HolderTTL = time.Duration(max(left, 0) * float64(time.Millisecond))
		return err
	})
	if err == nil && res.Acquired && res.Fence == 0 {
		// the row was deleted between the snapshot and the insert
		err = d.run(ctx, func(ctx context.Context, p querier) error {
			fs, args := d.fencing(p, sqlkit.KeyHash(req.Key), req.Token)
			return p.QueryRow(ctx, fs.refence, args...).Scan(&res.Fence)
		})
	}
	if err != nil {
		return drivers.AcquireResult{}, false, err
	}
	return res, deferred, nil
}

// Waiting in table mode: queued in the row, woken by a release's NOTIFY.
const (
	// WaitPollInterval is drivers.WaitPollInterval: how often a waiting
	// Acquire that no NOTIFY wakes retries, keeping its place in the queue.
	WaitPollInterval = drivers.WaitPollInterval
	// WaiterLiveness is drivers.WaiterLiveness: how long a queued waiter
	// keeps its turn without retrying.
	WaiterLiveness = drivers.WaiterLiveness
	deferRetry     = 300 * time.Microsecond // see queueDeferral
)

// restamp is how long after its entry's stamp an unwoken waiter attempts
// again: WaiterLiveness/4, the least age an attempt rewrites (tests vary it).
var restamp = WaiterLiveness / 4

// queueDeferral is how long a waiting Acquire that finds the row free for a
// queued driver puts off queueing, retrying every deferRetry (tests vary it).
var queueDeferral = 10 * time.Millisecond

// pollDelay is kit.PollDelay every WaitPollInterval, a variable for the tests.
var pollDelay = func(holderTTL time.Duration) time.Duration { return kit.PollDelay(holderTTL, WaitPollInterval) }

// acquireWaiting retries, queued in the row, until it gets the lock (or is
// granted it), or req.Wait passes or ctx ends (then: the last result, no
// error, the call out of the queue).
func (d *tableDriver) acquireWaiting(ctx context.Context, req drivers.AcquireRequest) (res drivers.AcquireResult, err error) {
	pace := kit.NewPacer(req.Wait)
	defer pace.Stop()
	wake, unwatch := d.watch(req.Key) // before the first attempt: no release missed
	defer unwatch()
	grant, ungrant := d.grants.add(req.Token)
	defer ungrant()
	queued := false
	defer func() {
		if !res.Acquired && queued {
			select {
			case fence := <-grant: // granted as the wait ended: keep it
				res, err = drivers.AcquireResult{Acquired: true, Fence: fence}, nil
			default:
				d.leave(ctx, req)
			}
		}
	}()
	deferUntil := time.Now().Add(queueDeferral)
	woken := false
	o := attemptOpts{queue: true}
	for fast := true; ; fast = false {
		o.fast, o.turn, o.deferQueue = fast, woken, time.Now().Before(deferUntil)
		if o.pid = d.registration(req); o.pid != nil {
			queued = true
		}
		res, deferred, err := d.acquireOnce(ctx, req, &o)
		if err != nil || res.Acquired {
			return res, err
		}
		delay := pollDelay(res.HolderTTL)
		if !o.due.IsZero() {
			delay = min(delay, max(time.Until(o.due), 0)+time.Millisecond)
		}
		if deferred {
			delay = deferRetry
		}
		tick, ok := pace.After(delay)
		if !ok {
			return res, nil
		}
		woken = false
		select {
		case fence := <-grant:
			return drivers.AcquireResult{Acquired: true, Fence: fence}, nil
		case <-wake:
			// a release notified this driver: most likely its turn
			woken = true
		case <-tick:
		case <-ctx.Done():
			return res, nil
		}
	}
}

// watch returns a channel that a release of key heard wakes, and its removal.
func (d *tableDriver) watch(key string) (<-chan struct{}, func() bool) {
	wake := make(chan struct{}, 1)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.startListenerLocked()
	return wake, d.subs.Add(func(ev drivers.Event) {
		if ev.Key == key {
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	})
}

// leaveTimeout bounds a leave, which runs after the call's ctx ended.
const leaveTimeout = 5 * time.Second

// grants are the waiting calls a release may grant a lock, by token
// (docs/postgres.md): a release hands the row to its queue's head if it
// registered (registration) and its listener backend is alive, so a crashed
// waiter is skipped; a hung one holds a grant for its ttl, as a hung holder.
type grants struct {
	mu    sync.Mutex
	calls map[string]chan uint64
}

// add registers a waiting call of token: the channel its grant's fence
// arrives on, and its removal.
func (g *grants) add(token string) (<-chan uint64, func()) {
	ch := make(chan uint64, 1)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls[token] = ch
	return ch, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.calls[token] == ch {
			delete(g.calls, token)
		}
	}
}

// deliver hands a grant notification, "fence,token", to its call. A call
// gone meanwhile left the queue, releasing the lock (leave).
func (g *grants) deliver(payload string) {
	f, token, ok := strings.Cut(payload, ",")
	fence, err := strconv.ParseUint(f, 10, 64)
	if !ok || err != nil || fence == 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case g.calls[token] <- fence: // a nil channel (no such call) is never ready
	default:
	}
}

// registration is the listener pid a waiting call registers in its queue
// entry, or nil (woken, not granted) with no LISTEN connection up or a
// grant payload too long for a NOTIFY.
func (d *tableDriver) registration(req drivers.AcquireRequest) any {
	pid := d.listenPID.Load()
	if pid == 0 || payload(req.Token) == "" || len(req.Token) > maxPayload-21 {
		return nil
	}
	return int32(pid)
}

// leave unregisters a call ending without the lock from its queue entry,
// releasing the lock if it was granted meanwhile.
func (d *tableDriver) leave(ctx context.Context, req drivers.AcquireRequest) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaveTimeout)
	defer cancel()
	granted := false
	found, err := d.queryRow(ctx, func(querier) (string, []any) { return d.sql.leave, []any{sqlkit.KeyHash(req.Key), d.id, req.Token} }, &granted)
	if err == nil && found && granted {
		_, _ = d.Release(ctx, req.Key, req.Token)
	}
}
