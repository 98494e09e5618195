package mysql

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// pools are the two kinds of advisory driver: on its own pool (sockets
// known) and on a pool given to NewWithDB.
var pools = []struct {
	name string
	open func(t *testing.T) Driver
}{
	{"own pool", func(t *testing.T) Driver { return openDriver(t, Options{DSN: testutil.MySQLDSN()}) }},
	{"given pool", func(t *testing.T) Driver { return givenDriver(t, openDB(t, testutil.MySQLDSN()), Options{}) }},
}

// held opens a driver, which holds key for tok, and another driver.
func held(t *testing.T, open func(t *testing.T) Driver) (ctx context.Context, d, other Driver, key, tok string) {
	t.Helper()
	ctx = ctxT(t)
	d = open(t)
	other = openDriver(t, Options{DSN: testutil.MySQLDSN()})
	key, tok = "mysqltest:"+runID+":"+t.Name(), token()
	if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute}); err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	return ctx, d, other, key, tok
}

// TestAdvisoryReleaseEndedContext: a Release whose context has already
// ended cannot run RELEASE_LOCK; it drops the lock's connection, so that
// the server frees the lock (advisory locks never expire), and forgets the
// holder. Another driver waiting in GET_LOCK then gets the lock.
func TestAdvisoryReleaseEndedContext(t *testing.T) {
	for _, tc := range pools {
		t.Run(tc.name, func(t *testing.T) {
			ctx, d, other, key, tok := held(t, tc.open)
			ended, cancel := context.WithCancel(ctx)
			cancel()
			if ok, err := d.Release(ended, key, tok); ok || !errors.Is(err, context.Canceled) {
				t.Fatalf("Release with an ended context = %v, %v; want false, context.Canceled", ok, err)
			}
			if h := adv(d).get(key, tok); h != nil {
				t.Fatal("the holder is still tracked after Release")
			}
			// GET_LOCK returns the moment the server frees the lock.
			res, err := other.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: token(), TTL: time.Minute, Wait: 5 * time.Second})
			if err != nil || !res.Acquired {
				t.Fatalf("the lock released with an ended context stays held: Acquire = %+v, %v", res, err)
			}
		})
	}
}

// TestAdvisoryReleaseNotHeld: a Release whose connection is alive but no
// longer holds the name (freed under the driver; another session holds it,
// or none) reports false without an error, drops that connection, and
// leaves the name to whoever holds it; a Release that frees the lock
// reports true. Both own and given pools (default fence source).
func TestAdvisoryReleaseNotHeld(t *testing.T) {
	for _, tc := range pools {
		for _, taken := range []bool{false, true} {
			name := tc.name + "/free"
			if taken {
				name = tc.name + "/taken"
			}
			t.Run(name, func(t *testing.T) {
				ctx, d, other, key, tok := held(t, tc.open)
				h := adv(d).get(key, tok)
				if _, err := h.conn.Conn.ExecContext(ctx, "DO RELEASE_LOCK(?)", h.name); err != nil {
					t.Fatal(err)
				}
				otherTok := token()
				if taken {
					if res, err := other.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: otherTok, TTL: time.Minute}); err != nil || !res.Acquired {
						t.Fatalf("other Acquire = %+v, %v", res, err)
					}
				}
				if ok, err := d.Release(ctx, key, tok); ok || err != nil {
					t.Fatalf("Release of a lock its connection no longer holds = %v, %v; want false, nil", ok, err)
				}
				if err := h.conn.Conn.PingContext(ctx); !errors.Is(err, sql.ErrConnDone) {
					t.Fatalf("the connection is still in use after a Release that found the lock gone: %v", err)
				}
				if taken {
					if ok, err := other.Release(ctx, key, otherTok); !ok || err != nil {
						t.Fatalf("the other holder's Release = %v, %v; want true", ok, err)
					}
				}
				if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute}); err != nil || !res.Acquired {
					t.Fatalf("Acquire again = %+v, %v", res, err)
				}
				if ok, err := d.Release(ctx, key, tok); !ok || err != nil {
					t.Fatalf("Release = %v, %v; want true", ok, err)
				}
			})
		}
	}
}

// TestAdvisoryReacquireBeforeLossNoticed: a key acquired again through the
// same driver after its holder's connection died, before the loss was
// noticed, replaces the lost holder, whose connection is dropped (not
// leaked) and whose loss is reported.
func TestAdvisoryReacquireBeforeLossNoticed(t *testing.T) {
	ctx := ctxT(t)
	db := openDB(t, testutil.MySQLDSN())
	admin := openDB(t, testutil.MySQLDSN())
	d := givenDriver(t, db, Options{ProbeInterval: time.Hour}) // no probe notices the kill
	lost := lostEvents(ctx, t, d, 4)
	key := "mysqltest:" + runID + ":" + t.Name()
	acquire := func(key, tok string) {
		t.Helper()
		if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute}); err != nil || !res.Acquired {
			t.Fatalf("Acquire = %+v, %v", res, err)
		}
	}
	t1, t2 := token(), token()
	acquire(key, t1)
	killSession(ctx, t, admin, adv(d).get(key, t1).connID)
	acquire(key, t2)
	select {
	case ev := <-lost:
		if ev.Key != key || ev.Token != t1 {
			t.Fatalf("Lost event %+v; want key %q token %q", ev, key, t1)
		}
	default:
		t.Fatal("no Lost event for the replaced holder")
	}
	if ok, err := d.Release(ctx, key, t2); err != nil || !ok {
		t.Fatalf("Release t2 = %v, %v", ok, err)
	}
	if ok, err := d.Release(ctx, key, t1); err != nil || ok {
		t.Fatalf("Release of the lost t1 = %v, %v; want false", ok, err)
	}
	t3 := token()
	acquire(key+":other", t3)
	if ok, err := d.Release(ctx, key+":other", t3); err != nil || !ok {
		t.Fatalf("Release t3 = %v, %v", ok, err)
	}
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := db.Stats().InUse; n != 0 {
		t.Fatalf("%d connections of the application's pool still in use after Close", n)
	}
}

// TestAdvisoryKeptConnectionReturned: a connection kept after a release
// goes back to the pool keepFor later even when no acquisition comes; with
// a pool of one connection, an application query waiting for it gets it
// then.
func TestAdvisoryKeptConnectionReturned(t *testing.T) {
	ctx := ctxT(t)
	db := openDB(t, testutil.MySQLDSN())
	db.SetMaxOpenConns(1)
	d := givenDriver(t, db, Options{})
	key, tok := "mysqltest:"+runID+":"+t.Name(), token()
	if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute}); err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	if ok, err := d.Release(ctx, key, tok); err != nil || !ok {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	released := time.Now()
	qctx, cancel := context.WithTimeout(ctx, keepFor+2*time.Second)
	defer cancel()
	var one int
	if err := db.QueryRowContext(qctx, "SELECT 1").Scan(&one); err != nil {
		t.Fatalf("application query %v after the release: %v", time.Since(released), err)
	}
	if e := time.Since(released); e > keepFor+time.Second {
		t.Fatalf("the kept connection came back %v after the release; want about %v", e, keepFor)
	}
	t.Logf("the pool's connection came back %v after the release", time.Since(released))
}

// givenDriver opens a driver on db (NewWithDB), closed when the test ends.
func givenDriver(t *testing.T, db *sql.DB, opts Options) Driver {
	t.Helper()
	d, err := NewWithDB(db, opts)
	if err != nil {
		t.Fatalf("NewWithDB: %v", err)
	}
	t.Cleanup(func() { d.Close(context.Background()) })
	return d
}
