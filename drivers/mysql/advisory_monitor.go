package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
)

// startMonitor starts the goroutine, ended by Close, that probes the held
// locks every ProbeInterval (reporting those lost) and runs upkeep.
func (a *advisoryDriver) startMonitor() {
	a.monitorWG.Go(func() {
		ctx := a.life.Closing()
		t := time.NewTimer(a.s.probe)
		defer t.Stop()
		nextProbe := time.Now().Add(a.s.probe)
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-a.wake:
			}
			a.mu.Lock()
			hs := slices.Collect(maps.Values(a.held))
			a.mu.Unlock()
			next := a.upkeep(hs)
			if now := time.Now(); !now.Before(nextProbe) {
				nextProbe = now.Add(a.s.probe)
				if a.poolFull() { // each lock on its own connection (checkOwn)
					for _, h := range hs {
						a.checkOwn(h, nil)
					}
				} else if len(hs) > 0 {
					held, errs := a.probe(ctx, hs, max(a.s.probe, time.Second))
					for i, h := range hs {
						if errs[i] == nil && !held[i] {
							a.lose(h)
						}
					}
				}
			}
			if nextProbe.Before(next) {
				next = nextProbe
			}
			t.Reset(time.Until(next)) // (Go 1.23+: no stale tick to drain)
		}
	})
}

// probe reports whether each of hs is held (heldLock.holds), reading the
// boot time and IS_USED_LOCK of RenewBatch locks per query on a pooled
// connection, each bounded by timeout if > 0.
func (a *advisoryDriver) probe(ctx context.Context, hs []*heldLock, timeout time.Duration) (held []bool, errs []error) {
	held, errs = make([]bool, len(hs)), make([]error, len(hs))
	for start := 0; start < len(hs); start += a.s.batch {
		chunk := hs[start:min(start+a.s.batch, len(hs))]
		args := make([]any, len(chunk))
		ids := make([]sql.NullInt64, len(chunk))
		var boot sql.NullInt64
		dest := []any{&boot}
		for i, h := range chunk {
			args[i] = h.name
			dest = append(dest, &ids[i])
		}
		qctx, cancel := ctx, context.CancelFunc(func() {})
		if timeout > 0 {
			qctx, cancel = context.WithTimeout(ctx, timeout)
		}
		err := a.queryBoot(qctx, func(boot string) string { return "SELECT " + boot + strings.Repeat(", IS_USED_LOCK(?)", len(chunk)) },
			args, dest...)
		cancel()
		for i, h := range chunk {
			if err != nil {
				errs[start+i] = fmt.Errorf("mysql: probe: %w", err)
			} else {
				held[start+i] = h.holds(ids[i], boot)
			}
		}
	}
	return held, errs
}

// poolFull reports whether all of the pool's maxOpenConns are in use.
func (a *advisoryDriver) poolFull() bool {
	st := a.db.Stats()
	return st.MaxOpenConnections > 0 && st.InUse >= st.MaxOpenConnections
}

// renew checks advisory leases with probe; ttl serves only on failure
// (renewFailed): these locks do not expire.
func (a *advisoryDriver) renew(ctx context.Context, leases []drivers.Lease) []drivers.RenewResult {
	out := make([]drivers.RenewResult, len(leases))
	var hs []*heldLock
	var idx []int
	for i, l := range leases {
		if h := a.get(l.Key, l.Token); h != nil {
			hs = append(hs, h)
			idx = append(idx, i)
		}
	}
	if len(hs) == 0 {
		return out
	}
	start := time.Now()
	var held []bool
	var errs []error
	if a.poolFull() { // rather than wait for a connection until the ttl
		held, errs = a.probeOwnAll(ctx, hs)
	} else {
		held, errs = a.probe(ctx, hs, 0)
	}
	for j, h := range hs {
		i := idx[j]
		switch {
		case errs[j] != nil: // the lock stays, unless unconfirmed by its expiry
			a.renewFailed(ctx, h, leases[i].TTL)
			out[i].Err = errs[j]
		case held[j]:
			h.confirm(start)
			out[i].Held = true
		default:
			a.lose(h)
		}
	}
	return out
}

// Inspect asks the server whether anyone holds key: a lock held through
// this driver in full, another with its holder's identity when the holder
// rows tell it. TTL is zero: advisory locks do not expire.
func (a *advisoryDriver) Inspect(ctx context.Context, key string) (drivers.LockInfo, bool, error) {
	return call2(&a.core, ctx, func(ctx context.Context) (drivers.LockInfo, bool, error) {
		if err := a.ready(ctx); err != nil {
			return drivers.LockInfo{}, false, err
		}
		var id, boot sql.NullInt64
		var holder sql.NullString
		// the boot source in use, not the next: a missing holder table's
		// error is also a missing source's
		read := false
		if st := a.stmts.Load(); st.holders {
			q, args := a.holderQuery(st.fence == FenceCounter, key, a.bootSQL[a.bootSrc.Load()])
			err := a.db.QueryRowContext(ctx, q, args...).Scan(&id, &boot, &holder)
			if missingTable(err) {
				a.ddl.Lost()
			}
			if err != nil && !noBootSource(err) {
				return drivers.LockInfo{}, false, fmt.Errorf("mysql: inspect: %w", err)
			}
			read = err == nil
		}
		if !read { // who holds it alone
			q := func(boot string) string { return "SELECT IS_USED_LOCK(?), " + boot }
			if err := a.queryBoot(ctx, q, []any{lockName(key)}, &id, &boot); err != nil {
				return drivers.LockInfo{}, false, fmt.Errorf("mysql: inspect: %w", err)
			}
		}
		if !id.Valid {
			return drivers.LockInfo{}, false, nil
		}
		a.mu.Lock()
		h := a.held[key]
		a.mu.Unlock()
		if h != nil && h.holds(id, boot) {
			return drivers.LockInfo{Token: h.token, Fence: h.fence}, true, nil
		}
		return drivers.LockInfo{Holder: holder.String}, true, nil
	})
}

// upkeep drops the locks of hs past the time a failed renewal set, and
// checks on their own connections those idle for half their wait_timeout:
// probes use pooled connections, and the server closes a connection idle
// for wait_timeout, handing its lock on before the holder is told. So a
// live holder's connection never idles out, while a partitioned one still
// loses its locks within wait_timeout. It returns when to run again.
func (a *advisoryDriver) upkeep(hs []*heldLock) time.Time {
	now := time.Now()
	next := now.Add(time.Hour)
	soon := func(t time.Time) {
		if t.Before(next) {
			next = t
		}
	}
	for _, h := range hs {
		if at := h.dropAt.Load(); at != 0 {
			if now.UnixNano() >= at {
				a.lose(h) // (never waits for a busy connection)
				continue
			}
			soon(time.Unix(0, at))
		}
		if h.idle <= 0 {
			continue
		}
		if due := time.Unix(0, h.used.Load()).Add(h.idle / 2); now.Before(due) {
			soon(due)
			continue
		}
		if a.checkOwn(h, nil) == nil { // a statement runs there: it counts; look again soon
			soon(now.Add(min(a.s.probe, h.idle/4)))
			continue
		}
		soon(now.Add(h.idle / 2))
	}
	return next
}

// wakeFor wakes the monitor for h, just acquired, if its wait_timeout is
// under four probe intervals (a touch may be due before the next look).
func (a *advisoryDriver) wakeFor(h *heldLock) {
	if h.idle > 0 && h.idle/2 < 2*a.s.probe {
		select {
		case a.wake <- struct{}{}:
		default:
		}
	}
}

// confirm records that a call started at start found h held.
func (h *heldLock) confirm(start time.Time) {
	h.confirmed.Store(start.UnixNano())
	h.dropAt.Store(0)
}

// renewFailed records that a renewal of h with ttl got no answer. Its
// holder counts h lost at its expiry (ttl after the last confirming call's
// start) and never releases it, and h does not expire: the monitor drops
// it then, unless confirmed first. Without a ttl, a renewal whose ctx
// ended drops h at once.
func (a *advisoryDriver) renewFailed(ctx context.Context, h *heldLock, ttl time.Duration) {
	if ttl > 0 {
		h.dropAt.CompareAndSwap(0, h.confirmed.Load()+int64(ttl))
	} else if ctx.Err() != nil {
		a.lose(h)
	}
}
