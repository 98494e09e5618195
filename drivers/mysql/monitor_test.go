package mysql

import (
	"context"
	"database/sql"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestAdvisoryProbeFullPool: when held locks fill the pool (maxOpenConns
// reached, no connection to spare for the probe), the locks are probed on
// their own connections: a KILLed holder is reported lost within about the
// probe interval, not at ttl, and a renewal of a lock still held answers
// held instead of waiting for a connection until its deadline.
func TestAdvisoryProbeFullPool(t *testing.T) {
	admin := openDB(t, testutil.MySQLDSN())

	t.Run("Monitor", func(t *testing.T) {
		ctx := ctxT(t)
		m := newMutex(t, Options{DSN: testutil.MySQLDSN(), MaxOpenConns: 1}, 30*time.Second)
		l, err := m.Acquire(ctx, "full")
		if err != nil {
			t.Fatal(err)
		}
		var id int64
		if err := admin.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", lockName(l.Key())).Scan(&id); err != nil {
			t.Fatal(err)
		}
		killSession(ctx, t, admin, id)
		killed := time.Now()
		select {
		case <-l.Done():
		case <-time.After(2 * time.Second): // probe interval 500ms
			t.Fatalf("lock not lost %v after its connection was killed, with the pool full", time.Since(killed))
		}
		t.Logf("lost %v after KILL", time.Since(killed))
		// the lost lock's connection went back: the next acquisition has one
		l2, err := m.Acquire(ctx, "full", component.WithTimeout(5*time.Second))
		if err != nil {
			t.Fatalf("Acquire after the loss: %v", err)
		}
		l2.Release(ctx)
	})

	t.Run("Renew", func(t *testing.T) {
		ctx := ctxT(t)
		d := openDriver(t, Options{DSN: testutil.MySQLDSN(), MaxOpenConns: 1, ProbeInterval: time.Hour})
		key, tok := "mysqltest:"+runID+":"+t.Name(), token()
		if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute}); err != nil || !res.Acquired {
			t.Fatalf("Acquire = %+v, %v", res, err)
		}
		renew := func() drivers.RenewResult {
			t.Helper()
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			start := time.Now()
			r := d.Renew(rctx, []drivers.Lease{{Key: key, Token: tok, TTL: time.Minute}})[0]
			if e := time.Since(start); e > time.Second {
				t.Fatalf("Renew took %v with the pool full", e)
			}
			return r
		}
		if r := renew(); r.Err != nil || !r.Held {
			t.Fatalf("Renew of a held lock with the pool full = %+v; want held", r)
		}
		killSession(ctx, t, admin, adv(d).get(key, tok).connID)
		if r := renew(); r.Err != nil || r.Held {
			t.Fatalf("Renew of a killed holder with the pool full = %+v; want not held", r)
		}
	})
}

// TestAdvisoryProbeOwnStall: with the pool full, the monitor checks each
// lock on its own connection; a network stall longer than the monitor's
// probe timeout but far shorter than the lock's ttl must not end the
// statement there (which would close the connection and free the lock).
func TestAdvisoryProbeOwnStall(t *testing.T) {
	ctx := ctxT(t)
	admin := openDB(t, testutil.MySQLDSN())
	p, opts := proxied(t, Options{MaxOpenConns: 1, ProbeInterval: 100 * time.Millisecond})
	d := openDriver(t, opts)
	var lost atomic.Int32
	if _, err := d.Subscribe(ctx, func(e drivers.Event) {
		if e.Kind == drivers.Lost {
			lost.Add(1)
		}
	}); err != nil {
		t.Fatal(err)
	}
	key, tok := "mysqltest:"+runID+":ownstall", token()
	if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute}); err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	// the scenario's timing: probes run every 100 ms on the holder's
	// connection (the pool's one connection holds the lock); the stall,
	// from a probe sent into it, outlasts the monitor's 1 s probe timeout
	h := adv(d).get(key, tok)
	acquired := h.used.Load()
	waitFor(t, 10*time.Second, "a probe on the holder's connection", func() bool { return h.used.Load() > acquired })
	p.Stall()
	waitFor(t, 10*time.Second, "a probe sent into the stall", func() bool { return p.Blocked() > 0 })
	time.Sleep(1500 * time.Millisecond) // the stall's length is the thing tested
	p.Resume()
	// probes take turns on the connection: the second to start after the
	// stall started after the stalled one and the first had ended
	resumed := time.Now().UnixNano()
	var first int64
	waitFor(t, 10*time.Second, "a probe after the stall", func() bool { first = h.used.Load(); return first > resumed })
	waitFor(t, 10*time.Second, "a second probe after the stall", func() bool { return h.used.Load() > first })
	var holder sql.NullInt64
	if err := admin.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", lockName(key)).Scan(&holder); err != nil {
		t.Fatal(err)
	}
	if lost.Load() != 0 || !holder.Valid {
		t.Fatalf("a 1.5 s stall lost a lock whose ttl is a minute: %d Lost events, server holder %v", lost.Load(), holder)
	}
	if ok, err := d.Release(ctx, key, tok); err != nil || !ok {
		t.Errorf("Release = %v, %v", ok, err)
	}
}
