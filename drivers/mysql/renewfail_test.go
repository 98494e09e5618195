package mysql

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestAdvisoryRenewDeadline: a renewal whose deadline passes without an
// answer (the component bounds each call well before the lock's expiry, to
// retry) leaves the holder's connection, and so the lock, alone; only when
// no renewal confirms the lock by its expiry does the driver give it up,
// telling its subscribers before it drops the connection.
func TestAdvisoryRenewDeadline(t *testing.T) {
	admin := openDB(t, testutil.MySQLDSN())
	serverHolder := func(ctx context.Context, key string) (sql.NullInt64, error) {
		var id sql.NullInt64
		err := admin.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", lockName(key)).Scan(&id)
		return id, err
	}
	// setup acquires key through a proxy, then makes one renewal with ttl
	// run into a 300 ms deadline on the stalled link. lost has the Lost
	// events from the start.
	setup := func(t *testing.T, ttl time.Duration) (d Driver, h *heldLock, lease drivers.Lease, lost <-chan drivers.Event) {
		ctx := ctxT(t)
		p, opts := proxied(t, Options{ProbeInterval: 50 * time.Millisecond})
		d = openDriver(t, opts)
		lost = lostEvents(ctx, t, d, 1)
		lease = drivers.Lease{Key: "mysqltest:" + runID + ":" + t.Name(), Token: token(), TTL: ttl}
		if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: lease.Key, Token: lease.Token, TTL: ttl}); err != nil || !res.Acquired {
			t.Fatalf("Acquire = %+v, %v", res, err)
		}
		h = adv(d).get(lease.Key, lease.Token)
		p.Stall()
		rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		r := d.Renew(rctx, []drivers.Lease{lease})[0]
		cancel()
		p.Resume()
		if r.Err == nil {
			t.Fatalf("Renew over a stalled link = %+v; want an error", r)
		}
		return d, h, lease, lost
	}

	t.Run("KeepsLock", func(t *testing.T) {
		ctx := ctxT(t)
		d, h, lease, lost := setup(t, 2*time.Second)
		if r := d.Renew(ctx, []drivers.Lease{lease})[0]; r.Err != nil || !r.Held {
			t.Fatalf("Renew after the link recovered = %+v; want held", r)
		}
		if id, err := serverHolder(ctx, lease.Key); err != nil || id.Int64 != h.connID {
			t.Fatalf("server's holder %v, %v; want the holder's connection %d", id, err, h.connID)
		}
		if at := h.dropAt.Load(); at != 0 {
			t.Fatalf("the confirmed lock is still to be dropped at %v", time.Unix(0, at))
		}
		select {
		case ev := <-lost:
			t.Fatalf("Lost event %+v", ev)
		default:
		}
		if ok, err := d.Release(ctx, lease.Key, lease.Token); err != nil || !ok {
			t.Fatalf("Release = %v, %v", ok, err)
		}
	})

	t.Run("DropsAtExpiry", func(t *testing.T) {
		ctx := ctxT(t)
		ttl := time.Second
		start := time.Now()
		d, h, lease, _ := setup(t, ttl)
		type told struct {
			after  time.Duration
			holder sql.NullInt64
			err    error
		}
		ch := make(chan told, 1)
		cancel, err := d.Subscribe(ctx, func(ev drivers.Event) {
			if ev.Kind == drivers.Lost && ev.Token == lease.Token {
				id, err := serverHolder(ctx, lease.Key)
				ch <- told{time.Since(start), id, err}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		defer cancel()
		var got told
		select {
		case got = <-ch:
		case <-time.After(5 * time.Second):
			t.Fatal("no Lost event for a lock no renewal confirmed by its expiry")
		}
		if got.after < ttl || got.err != nil || got.holder.Int64 != h.connID {
			t.Fatalf("Lost %v after the acquisition (ttl %v), the server's holder then %v, %v; want after the ttl, while the holder's connection %d still held it",
				got.after, ttl, got.holder, got.err, h.connID)
		}
		waitFor(t, 5*time.Second, "the server to free the lock", func() bool {
			id, err := serverHolder(ctx, lease.Key)
			return err == nil && !id.Valid
		})
	})
}

// TestRenewStallKeepsLock: through the component, a link that stalls
// across a renewal's deadline (a third of the ttl after the call) but
// recovers before the lock's expiry costs nothing: the component retries
// and the lock stays with its holder. Before, the driver dropped the
// holder's connection when the first call's deadline passed.
func TestRenewStallKeepsLock(t *testing.T) {
	ctx := ctxT(t)
	admin := openDB(t, testutil.MySQLDSN())
	p, opts := proxied(t, Options{})
	d := openDriver(t, opts)
	m := mutexOn(t, d, 3*time.Second)
	l, err := m.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	id := adv(d).get(l.Key(), l.Token()).connID
	// The scenario: the renewal due at 1 s stalls, its call's deadline
	// passes at 2 s (the driver then sets when to drop the lock unless a
	// renewal confirms it), the link recovers then, before the lock's
	// expiry (about 3 s after the last confirmation), and a retried
	// renewal confirms it.
	h := adv(d).get(l.Key(), l.Token())
	p.Stall()
	waitFor(t, 10*time.Second, "the renewal's deadline", func() bool { return h.dropAt.Load() != 0 })
	p.Resume()
	resumed := time.Now().UnixNano()
	waitFor(t, 10*time.Second, "a renewal after the stall", func() bool { return h.confirmed.Load() > resumed })
	if at := h.dropAt.Load(); at != 0 {
		t.Fatalf("the confirmed lock is still to be dropped at %v", time.Unix(0, at))
	}
	var holder sql.NullInt64
	if err := admin.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", lockName(l.Key())).Scan(&holder); err != nil {
		t.Fatal(err)
	}
	if l.Err() != nil || holder.Int64 != id {
		t.Fatalf("after a stall the ttl covered: the lock's Err %v, the server's holder %v; want held by connection %d", l.Err(), holder, id)
	}
	if ok, err := l.Release(ctx); err != nil || !ok {
		t.Fatalf("Release = %v, %v", ok, err)
	}
}
