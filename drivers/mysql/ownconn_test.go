package mysql

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestFullPoolStallRenewReturns: with the pool full (maxOpenConns
// reached: locks are checked on their own connections), a statement
// stalled on a lock's connection (the monitor's check) holds up no
// renewal: it fails by its deadline instead of waiting for the stall to
// end — before, it waited for the connection, and the component's Close
// with it. The stall, shorter than the ttl, costs nothing: the check goes
// on and finds the lock held.
func TestFullPoolStallRenewReturns(t *testing.T) {
	ctx := ctxT(t)
	lease := drivers.Lease{Key: "mysqltest:" + runID + ":" + t.Name(), Token: token(), TTL: time.Minute}
	d, p, admin, lost := stalledCheck(ctx, t, lease)
	id := adv(d).get(lease.Key, lease.Token).connID
	rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	start := time.Now()
	r := d.Renew(rctx, []drivers.Lease{lease})[0]
	took := time.Since(start)
	cancel()
	p.Resume()
	if r.Err == nil || took > time.Second {
		t.Fatalf("Renew(deadline 300ms) behind a stalled check = %+v after %v; want an error by its deadline", r, took)
	}
	waitFor(t, 5*time.Second, "a renewal after the stall", func() bool {
		r := d.Renew(ctx, []drivers.Lease{lease})[0]
		return r.Err == nil && r.Held
	})
	var holder sql.NullInt64
	if err := admin.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", lockName(lease.Key)).Scan(&holder); err != nil || holder.Int64 != id {
		t.Fatalf("server's holder %v, %v; want the holder's connection %d", holder, err, id)
	}
	select {
	case ev := <-lost:
		t.Fatalf("Lost event %+v", ev)
	default:
	}
	if ok, err := d.Release(ctx, lease.Key, lease.Token); err != nil || !ok {
		t.Fatalf("Release = %v, %v", ok, err)
	}
}

// stalledCheck acquires lease through a driver whose pool is full (one
// connection), behind a proxy, then stalls the link while the monitor's
// check runs on the lock's own connection. The proxy resumes after 5 s at
// the latest (a bound on the test should a call wait for the stall).
func stalledCheck(ctx context.Context, t *testing.T, lease drivers.Lease) (Driver, *testutil.Proxy, *sql.DB, <-chan drivers.Event) {
	t.Helper()
	admin := openDB(t, testutil.MySQLDSN())
	p, opts := proxied(t, Options{MaxOpenConns: 1, ProbeInterval: 50 * time.Millisecond})
	d := openDriver(t, opts)
	lost := lostEvents(ctx, t, d, 1)
	if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: lease.Key, Token: lease.Token, TTL: lease.TTL}); err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	p.Stall()
	resume := time.AfterFunc(5*time.Second, p.Resume)
	t.Cleanup(func() { resume.Stop() })
	waitFor(t, 2*time.Second, "the monitor's check sent into the stall", func() bool { return p.Blocked() > 0 })
	return d, p, admin, lost
}

// TestFullPoolStallRelease: a release whose ctx ends while a statement
// stalled on the lock's connection (the monitor's check, the pool being
// full) holds it returns by then, and still gives the lock up: the check
// is ended, which closes the connection, and the server frees the lock
// once the link lets the close through — with no Lost event, the holder
// having let the lock go. Before, it waited for the stall to end, and the
// component's Close with it.
func TestFullPoolStallRelease(t *testing.T) {
	ctx := ctxT(t)
	key, tok := "mysqltest:"+runID+":"+t.Name(), token()
	d, p, admin, lost := stalledCheck(ctx, t, drivers.Lease{Key: key, Token: tok, TTL: time.Minute})
	rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	start := time.Now()
	ok, err := d.Release(rctx, key, tok)
	took := time.Since(start)
	cancel()
	p.Resume()
	if ok || err == nil || took > time.Second {
		t.Fatalf("Release(deadline 300ms) behind a stalled check = %v, %v after %v; want an error by its deadline", ok, err, took)
	}
	waitFor(t, 5*time.Second, "the server to free the lock", func() bool {
		var holder sql.NullInt64
		err := admin.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", lockName(key)).Scan(&holder)
		return err == nil && !holder.Valid
	})
	if h := adv(d).get(key, tok); h != nil {
		t.Fatalf("the driver still tracks the released lock: %+v", h)
	}
	select {
	case ev := <-lost:
		t.Fatalf("Lost event %+v for a lock its holder released", ev)
	default:
	}
}

// TestLoseBusyConnection: when the probe finds a lock lost while a
// statement runs on the lock's connection (one stalled on the link; here
// the test holds the connection), the Lost event goes out at once rather
// than after that statement, and the connection is dropped when it ends.
// Before, the monitor waited for the connection, and every lock's probe
// with it.
func TestLoseBusyConnection(t *testing.T) {
	ctx := ctxT(t)
	admin := openDB(t, testutil.MySQLDSN())
	d := openDriver(t, Options{DSN: testutil.MySQLDSN(), ProbeInterval: 50 * time.Millisecond})
	lost := lostEvents(ctx, t, d, 1)
	key, tok := "mysqltest:"+runID+":"+t.Name(), token()
	if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute}); err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	h := adv(d).get(key, tok)
	h.mu.Lock() // a statement runs on the connection
	busy := true
	defer func() {
		if busy {
			adv(d).unlock(h)
		}
	}()
	killSession(ctx, t, admin, h.connID)
	select {
	case ev := <-lost:
		if ev.Token != tok {
			t.Fatalf("Lost event %+v; want token %s", ev, tok)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("no Lost event while the lost lock's connection is busy")
	}
	if adv(d).get(key, tok) != nil {
		t.Fatal("the lost lock is still tracked")
	}
	busy = false
	adv(d).unlock(h) // the statement ends: its user drops the connection
	h.mu.Lock()      // (the monitor may be looking at h too)
	done := h.done
	h.mu.Unlock()
	if !done {
		t.Fatal("the lost lock's connection was not dropped when its statement ended")
	}
}
