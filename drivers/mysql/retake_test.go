package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// loggingDB opens a pool of go-sql-driver connections (interpolating
// parameters) that record what they run in log: the first word of every
// statement (UPDATE, INSERT …), or with whole the statement's text; they
// talk to the real server.
func loggingDB(t *testing.T, log *testutil.StatementLog, whole bool) *sql.DB {
	t.Helper()
	cfg, err := gomysql.ParseDSN(testutil.MySQLDSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.InterpolateParams = true
	c, err := gomysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(loggingConnector{c, log, whole})
	t.Cleanup(func() { db.Close() })
	return db
}

type loggingConnector struct {
	driver.Connector
	log   *testutil.StatementLog
	whole bool
}

func (c loggingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return loggingConn{conn, c.log, c.whole}, nil
}

// loggingConn forwards to a go-sql-driver connection (which implements
// every interface used here) and records what it runs.
type loggingConn struct {
	driver.Conn
	log   *testutil.StatementLog
	whole bool
}

func (c loggingConn) record(query string) {
	if !c.whole {
		query = strings.ToUpper(strings.Fields(query)[0])
	}
	c.log.Add(query)
}

func (c loggingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	c.record(query)
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, query, args)
}

func (c loggingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	c.record(query)
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, query, args)
}

func (c loggingConn) ResetSession(ctx context.Context) error {
	return c.Conn.(driver.SessionResetter).ResetSession(ctx)
}

func (c loggingConn) IsValid() bool { return c.Conn.(driver.Validator).IsValid() }

// TestTableRetake checks the statements of table-mode acquisitions: a free
// row (released or expired) is taken by one plain UPDATE, its fence one
// more than the last; a missing row costs that UPDATE and the insert; a
// handover is one UPDATE; and a driver waiting for the key skips the
// UPDATE.
func TestTableRetake(t *testing.T) {
	ctx := ctxT(t)
	log := &testutil.StatementLog{}
	db := loggingDB(t, log, false)
	d, err := NewWithDB(db, Options{Mode: ModeTable, Table: "mutexfx_test_locks"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(context.Background()) })
	other := openDriver(t, Options{DSN: testutil.MySQLDSN(), Mode: ModeTable, Table: "mutexfx_test_locks"})
	key := fmt.Sprintf("retake:%d", time.Now().UnixNano())
	acquire := func(d Driver, tok string, ttl time.Duration) drivers.AcquireResult {
		t.Helper()
		res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// the schema, created at first use, is not counted
	if _, _, err := d.Inspect(ctx, "retake:warm"); err != nil {
		t.Fatal(err)
	}
	log.Take()

	first := acquire(d, "a", time.Minute)
	if got := log.Take(); !first.Acquired || !slices.Equal(got, []string{"UPDATE", "INSERT"}) {
		t.Fatalf("acquisition of a new key = %+v, statements %q; want acquired by UPDATE, INSERT", first, got)
	}
	if ok, err := d.Release(ctx, key, "a"); err != nil || !ok {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	log.Take()
	again := acquire(d, "b", time.Minute)
	if got := log.Take(); !again.Acquired || !slices.Equal(got, []string{"UPDATE"}) || again.Fence <= first.Fence {
		t.Fatalf("acquisition of a released row = %+v, statements %q; want acquired by one UPDATE, a fence above %d", again, got, first.Fence)
	}
	// handed over to a new token: one UPDATE, a greater fence
	released, handed, err := tab(d).Handover(ctx, key, "b", drivers.AcquireRequest{Key: key, Token: "b2", TTL: time.Minute})
	if got := log.Take(); err != nil || !released || !handed.Acquired || handed.Fence <= again.Fence || !slices.Equal(got, []string{"UPDATE"}) {
		t.Fatalf("Handover = %v, %+v, %v, statements %q; want handed by one UPDATE, a fence above %d", released, handed, err, got, again.Fence)
	}
	// held: the UPDATE matches nothing, the insert statement reports the
	// holder; the key is watched from then on
	if res := acquire(d, "c", time.Minute); res.Acquired || res.HolderTTL <= 0 {
		t.Fatalf("acquisition of a held row = %+v; want taken, with the holder's ttl", res)
	}
	if got := log.Take(); !slices.Equal(got[:2], []string{"UPDATE", "INSERT"}) {
		t.Fatalf("acquisition of a held row: statements %q; want UPDATE, INSERT first", got)
	}
	if res := acquire(d, "c", time.Minute); res.Acquired {
		t.Fatal("acquired a held row")
	}
	if got := log.Take(); slices.Contains(got, "UPDATE") {
		t.Fatalf("a driver waiting for the key: statements %q; want no UPDATE", got)
	}
	// expired: taken by the UPDATE, by another driver
	if ok, err := d.Release(ctx, key, "b2"); err != nil || !ok {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	short := acquire(other, "short", time.Millisecond)
	if !short.Acquired {
		t.Fatalf("other's acquisition of the released row = %+v", short)
	}
	waitFor(t, 2*time.Second, "the short lock's expiry", func() bool {
		_, held, err := other.Inspect(ctx, key)
		return err == nil && !held
	})
	if res := acquire(other, "late", time.Minute); !res.Acquired || res.Fence <= short.Fence {
		t.Fatalf("acquisition of an expired row = %+v; want acquired, a fence above %d", res, short.Fence)
	}
}

// TestTableHandoverQueued checks that a table-mode handover does not pass
// the lock on while another driver queues for the row: it releases it, and
// the queued driver takes it.
func TestTableHandoverQueued(t *testing.T) {
	ctx := ctxT(t)
	opts := Options{DSN: testutil.MySQLDSN(), Mode: ModeTable, Table: "mutexfx_test_locks"}
	a, b := openDriver(t, opts), openDriver(t, opts)
	key := fmt.Sprintf("handover:queued:%d", time.Now().UnixNano())
	if res, err := a.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "a", TTL: time.Minute}); err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	// b's failed attempt queues it in the row
	if res, err := b.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "b", TTL: time.Minute}); err != nil || res.Acquired {
		t.Fatalf("b's Acquire of a held lock = %+v, %v", res, err)
	}
	if q := queueOf(t, a, key); len(q) != 1 {
		t.Fatalf("queue %q; want b queued", q)
	}
	released, res, err := tab(a).Handover(ctx, key, "a", drivers.AcquireRequest{Key: key, Token: "a2", TTL: time.Minute})
	if err != nil || !released || res.Acquired {
		t.Fatalf("Handover with a driver queued = %v, %+v, %v; want released, not handed", released, res, err)
	}
	if res, err := b.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "b", TTL: time.Minute}); err != nil || !res.Acquired {
		t.Fatalf("queued driver's Acquire after the release = %+v, %v; want acquired", res, err)
	}
}
