package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/dbconn"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestPinnedSockets: the connections a driver with its own pool pins know
// their sockets (so that their statements run without go-sql-driver's
// context watcher), a given pool's do not, and both hold and release locks;
// a closed driver's pool leaves no socket behind.
func TestPinnedSockets(t *testing.T) {
	for _, tc := range []struct {
		name   string
		open   func(t *testing.T) Driver
		socket bool
	}{
		{"own pool", func(t *testing.T) Driver { return openDriver(t, Options{DSN: testutil.MySQLDSN()}) }, true},
		{"given pool", func(t *testing.T) Driver {
			d, err := NewWithDB(openDB(t, testutil.MySQLDSN()), Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Close(context.Background()) })
			return d
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(ctxT(t))
			defer cancel()
			d := tc.open(t)
			key := "mysqltest:" + runID + ":" + t.Name()
			tok := token()
			if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute}); err != nil || !res.Acquired {
				t.Fatalf("Acquire = %+v, %v", res, err)
			}
			h := adv(d).get(key, tok)
			if got := h.conn.Sock != nil; got != tc.socket {
				t.Fatalf("socket known = %v, want %v", got, tc.socket)
			}
			if ok, err := d.Extend(ctx, key, tok, time.Minute); err != nil || !ok {
				t.Fatalf("Extend = %v, %v", ok, err)
			}
			if ok, err := d.Release(ctx, key, tok); err != nil || !ok {
				t.Fatalf("Release = %v, %v", ok, err)
			}
			if err := d.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if coreOf(d).socks != nil {
				if left := coreOf(d).socks.Len(); left != 0 {
					t.Fatalf("%d sockets left after Close", left)
				}
			}
		})
	}
}

// TestPinnedStatementCancelled: a statement on a pinned connection ends
// when its context does (the socket is closed under it), the error tells
// why, and the server ends the session, freeing what it held.
func TestPinnedStatementCancelled(t *testing.T) {
	ctx := ctxT(t)
	d := openDriver(t, Options{DSN: testutil.MySQLDSN()})
	admin := openDB(t, testutil.MySQLDSN())
	p, err := adv(d).keep.Pin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer dbconn.Discard(p.Conn)
	if p.Sock == nil {
		t.Fatal("the own pool's connection has no known socket")
	}
	name := "mysqltest:" + runID + ":cancelled"
	var got, id int64
	if err := p.QueryRow(ctx, "SELECT GET_LOCK(?, 0), CONNECTION_ID()", []any{name}, &got, &id); err != nil || got != 1 {
		t.Fatalf("GET_LOCK = %d, %v", got, err)
	}
	// Block in the server: wait for a lock another session holds.
	other := name + ":other"
	hold, err := admin.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	if err := hold.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", other).Scan(&got); err != nil || got != 1 {
		t.Fatalf("other GET_LOCK = %d, %v", got, err)
	}
	why := errors.New("caller gone")
	cctx, cancel := context.WithCancelCause(ctx)
	errc := make(chan error, 1)
	go func() {
		var blocked int64
		errc <- p.QueryRow(cctx, "SELECT GET_LOCK(?, 30)", []any{other}, &blocked)
	}()
	testutil.Poll(t, 10*time.Second, "the GET_LOCK waiting in the server",
		running(ctx, t, admin, "ID = ? AND STATE = 'User lock'", id))
	start := time.Now()
	cancel(why)
	err = <-errc
	if !errors.Is(err, why) {
		t.Fatalf("cancelled statement: %v; want the ctx's cause", err)
	}
	if e := time.Since(start); e > 5*time.Second {
		t.Fatalf("cancelled statement returned after %v", e)
	}
	// A GET_LOCK wait looks at its connection every second.
	waitFor(t, 10*time.Second, "the server to free the cancelled session's lock", func() bool {
		var free int64
		err := admin.QueryRowContext(ctx, "SELECT IS_FREE_LOCK(?)", name).Scan(&free)
		return err == nil && free == 1
	})
	// A statement whose context already ended is not sent.
	if err := p.QueryRow(cctx, "SELECT 1", nil, &got); !errors.Is(err, why) {
		t.Fatalf("statement with an ended ctx: %v; want the ctx's cause", err)
	}
}

// TestPoolStatementCancelled: a table-mode statement (on a connection of
// the driver's own pool) with a cancellable context ends when the context
// does, by its socket, and reports the context's cause; the pool goes on.
func TestPoolStatementCancelled(t *testing.T) {
	ctx := ctxT(t)
	d := openDriver(t, Options{DSN: testutil.MySQLDSN(), Mode: ModeTable})
	admin := openDB(t, testutil.MySQLDSN())
	why := errors.New("caller gone")
	cctx, cancel := context.WithCancelCause(ctx)
	query := fmt.Sprintf("SELECT SLEEP(30) /* %s %d */", runID, time.Now().UnixNano())
	errc := make(chan error, 1)
	go func() {
		_, err := coreOf(d).exec(cctx, query, nil)
		errc <- err
	}()
	testutil.Poll(t, 10*time.Second, "the statement running in the server", running(ctx, t, admin, "INFO = ?", query))
	start := time.Now()
	cancel(why)
	err := <-errc
	if !errors.Is(err, why) {
		t.Fatalf("cancelled statement: %v; want the ctx's cause (socket cancellation)", err)
	}
	if e := time.Since(start); e > 5*time.Second {
		t.Fatalf("cancelled statement returned after %v", e)
	}
	// A cancellable context again: a connection from the pool, not the cut one.
	c2, cancel2 := context.WithCancel(ctx)
	defer cancel2()
	if _, err := coreOf(d).exec(c2, "DO 1", nil); err != nil {
		t.Fatalf("next statement: %v", err)
	}
}

// TestPoolLiveness: a pooled connection the server closed is found dead
// when the pool hands it out (go-sql-driver's liveness check, which needs
// the wrapped socket's raw connection) and replaced, so the next statement
// succeeds.
func TestPoolLiveness(t *testing.T) {
	ctx := ctxT(t)
	d := openDriver(t, Options{DSN: testutil.MySQLDSN(), Mode: ModeTable, MaxOpenConns: 1})
	admin := openDB(t, testutil.MySQLDSN())
	var id int64
	if err := coreOf(d).db.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	killSession(ctx, t, admin, id)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if _, err := coreOf(d).exec(cctx, "DO 1", nil); err != nil {
		t.Fatalf("statement after the pooled connection was killed: %v", err)
	}
}

// running is a condition for testutil.Poll: the server lists a session
// matching where (a condition on information_schema.PROCESSLIST with one
// parameter, arg), that is, the statement to cancel is running.
func running(ctx context.Context, t *testing.T, admin *sql.DB, where string, arg any) func() bool {
	return func() bool {
		var n int
		err := admin.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE "+where, arg).Scan(&n)
		if err != nil {
			t.Fatalf("processlist: %v", err)
		}
		return n > 0
	}
}
