package mysql

import (
	"database/sql/driver"
	"reflect"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestPreparedKept: on the driver's own pool, the advisory acquire and
// release statements are prepared once per connection and then only
// executed (the server's own counters of that session say so), and the
// fences they return keep growing.
func TestPreparedKept(t *testing.T) {
	ctx := ctxT(t)
	d := openDriver(t, Options{DSN: testutil.MySQLDSN(), ProbeInterval: time.Hour})
	key := "mysqltest:" + runID + ":" + t.Name()
	var last uint64
	pair := func() {
		t.Helper()
		tok := token()
		res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute})
		if err != nil || !res.Acquired || res.Fence <= last {
			t.Fatalf("Acquire = %+v, %v; want a fence above %d", res, err, last)
		}
		last = res.Fence
		if ok, err := d.Release(ctx, key, tok); err != nil || !ok {
			t.Fatalf("Release = %v, %v", ok, err)
		}
	}
	// counters reads the session's statement counters on the kept
	// connection, and keeps it again.
	counters := func() (prepare, execute int64, sock *socket) {
		t.Helper()
		conn, cached, err := adv(d).keep.Get(ctx)
		if err != nil || !cached {
			t.Fatalf("keep.Get = cached %v, %v; want the kept connection", cached, err)
		}
		defer adv(d).keep.Put(conn)
		for name, dst := range map[string]*int64{"Com_stmt_prepare": &prepare, "Com_stmt_execute": &execute} {
			var n string
			if err := conn.Conn.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE ?", name).Scan(&n, dst); err != nil {
				t.Fatal(err)
			}
		}
		return prepare, execute, conn.Sock
	}
	pair()
	p0, e0, sock := counters()
	if p0 != 2 || e0 != 2 || len(sock.Stmts()) != 2 || sock.TextOnly() {
		t.Fatalf("after one pair: %d prepared, %d executed, %d kept, text only %v; want 2, 2, 2, false", p0, e0, len(sock.Stmts()), sock.TextOnly())
	}
	for range 5 {
		pair()
	}
	p1, e1, again := counters()
	if again != sock || p1 != p0 || e1-e0 != 10 {
		t.Fatalf("after five more pairs on the same connection (%v): %d prepared, %d executed; want %d and %d", again == sock, p1, e1, p0, e0+10)
	}
}

// TestSequenceDropped: the fence sequence dropped under a running driver
// fails the next acquisition (MariaDB: unknown sequence, 4091), which makes
// the driver create it again; the one after it succeeds — on the driver's
// own pool with its statements kept prepared (on another connection: the
// failed acquisition dropped its own), on a given pool as text.
func TestSequenceDropped(t *testing.T) {
	const seq = "mutexfx_test_fence_dropped"
	admin := openDB(t, testutil.MySQLDSN())
	for _, own := range []bool{true, false} {
		name := map[bool]string{true: "own pool", false: "given pool"}[own]
		t.Run(name, func(t *testing.T) {
			ctx := ctxT(t)
			opts := Options{FenceTable: seq, ProbeInterval: time.Hour}
			var d Driver
			if own {
				opts.DSN = testutil.MySQLDSN()
				d = openDriver(t, opts)
			} else {
				d = givenDriver(t, openDB(t, testutil.MySQLDSN()), opts)
			}
			key, tok := "mysqltest:"+runID+":"+t.Name(), token()
			acquire := func() (drivers.AcquireResult, error) {
				return d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute})
			}
			release := func() {
				t.Helper()
				if ok, err := d.Release(ctx, key, tok); err != nil || !ok {
					t.Fatalf("Release = %v, %v", ok, err)
				}
			}
			if res, err := acquire(); err != nil || !res.Acquired {
				t.Fatalf("Acquire = %+v, %v", res, err)
			}
			release()
			if _, err := admin.ExecContext(ctx, "DROP SEQUENCE "+seq); err != nil {
				t.Fatal(err)
			}
			if res, err := acquire(); err == nil || !missingTable(err) {
				t.Fatalf("Acquire with the sequence dropped = %+v, %v; want the missing sequence's error", res, err)
			}
			res, err := acquire()
			if err != nil || !res.Acquired {
				t.Fatalf("Acquire after that = %+v, %v; want the lock, the sequence created again", res, err)
			}
			sock := adv(d).get(key, tok).conn.Sock
			release()
			if own && (sock == nil || sock.TextOnly() || len(sock.Stmts()) == 0) {
				t.Fatalf("socket %+v: want its statements kept prepared", sock)
			}
		})
	}
}

// TestPreparedForgotten: statements the server no longer knows (as after a
// reset of the session under the driver: here each is closed through a
// copy of its handle) are prepared once more, and locks work on.
func TestPreparedForgotten(t *testing.T) {
	ctx := ctxT(t)
	d := openDriver(t, Options{DSN: testutil.MySQLDSN(), ProbeInterval: time.Hour})
	key := "mysqltest:" + runID + ":" + t.Name()
	pair := func() {
		t.Helper()
		tok := token()
		if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute}); err != nil || !res.Acquired {
			t.Fatalf("Acquire = %+v, %v", res, err)
		}
		if ok, err := d.Release(ctx, key, tok); err != nil || !ok {
			t.Fatalf("Release = %v, %v", ok, err)
		}
	}
	pair()
	conn, cached, err := adv(d).keep.Get(ctx)
	if err != nil || !cached || len(conn.Sock.Stmts()) != 2 {
		t.Fatalf("keep.Get = cached %v, %v, %d statements kept; want the kept connection and 2", cached, err, len(conn.Sock.Stmts()))
	}
	kept := map[string]driver.Stmt{}
	err = conn.Conn.Raw(func(any) error {
		for q, st := range conn.Sock.Stmts() {
			kept[q] = st
			dup := reflect.New(reflect.TypeOf(st).Elem())
			dup.Elem().Set(reflect.ValueOf(st).Elem())
			if err := dup.Interface().(driver.Stmt).Close(); err != nil {
				return err
			}
		}
		return nil
	})
	adv(d).keep.Put(conn)
	if err != nil {
		t.Fatal(err)
	}
	pair()
	if conn.Sock.TextOnly() || len(conn.Sock.Stmts()) != 2 {
		t.Fatalf("text only %v, %d statements kept; want 2, prepared again", conn.Sock.TextOnly(), len(conn.Sock.Stmts()))
	}
	for q, st := range conn.Sock.Stmts() {
		if kept[q] == st {
			t.Fatalf("statement %q not prepared again", q)
		}
	}
	pair()
}
