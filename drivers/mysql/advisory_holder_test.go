package mysql

import (
	"context"
	"crypto/rand"
	"database/sql"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/sqlkit"
	"github.com/mutexfx/mutexfx/drivers/internal/sqltest"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// fenceOpts are advisory options with each fence source; the counter
// fence in a table of the tests' own (the default name is MariaDB's
// sequence here).
func fenceOpts() map[string]Options {
	return map[string]Options{
		FenceCounter:   {DSN: testutil.MySQLDSN(), Fence: FenceCounter, FenceTable: "mutexfx_test_fence_counter"},
		FenceSequence:  {DSN: testutil.MySQLDSN(), Fence: FenceSequence},
		FenceUUIDShort: {DSN: testutil.MySQLDSN(), Fence: FenceUUIDShort},
	}
}

// setHolderRow makes the row that keeps the holder of key (opts' fence)
// name connection id with identity holder, written at the server's clock
// takenAt (an SQL expression).
func setHolderRow(ctx context.Context, t *testing.T, db *sql.DB, opts Options, key string, id int64, holder, takenAt string) {
	t.Helper()
	var err error
	if opts.Fence == FenceCounter {
		_, err = db.ExecContext(ctx, "UPDATE "+opts.FenceTable+" SET holder = ?, conn_id = ?, taken_at = "+takenAt+
			" WHERE name_hash = ?", holder, id, sqlkit.KeyHash(key))
	} else {
		_, err = db.ExecContext(ctx, "REPLACE INTO "+DefaultFenceTable+holderSuffix+" (slot, holder, conn_id, taken_at) VALUES (?, ?, ?, "+
			takenAt+")", id%holderSlots, holder, id)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// oldCounterTable creates table as an earlier version made a counter
// fence table (no holder columns), dropped when the test ends.
func oldCounterTable(ctx context.Context, t *testing.T, db *sql.DB, table string) string {
	t.Helper()
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+table+
		" (name_hash BINARY(32) NOT NULL, fence BIGINT UNSIGNED NOT NULL, PRIMARY KEY (name_hash)) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.ExecContext(context.Background(), "DROP TABLE "+table) })
	return table
}

// heldBy takes key for tok through d and checks that other's Inspect
// shows it held by want, with no token nor fence.
func heldBy(t *testing.T, d, other Driver, key, tok, want string) {
	t.Helper()
	ctx := ctxT(t)
	if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute}); err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	if info, held, err := other.Inspect(ctx, key); err != nil || !held || info.Token != "" || info.Fence != 0 || info.Holder != want {
		t.Errorf("token %q: Inspect = %+v, %v, %v; want held by %q, no token", tok, info, held, err, want)
	}
}

// TestAdvisoryHolder runs the holder tests that hold for each fence
// source, with each.
func TestAdvisoryHolder(t *testing.T) {
	for _, tc := range []struct {
		name string
		test func(*testing.T, Options)
	}{
		{"Shown", testHolderShown},
		{"Stale", testHolderStale},
		{"OfOtherMutex", func(t *testing.T, opts Options) {
			sqltest.HolderOfOtherMutex(t, newMutex(t, opts, 5*time.Second), newMutex(t, opts, 5*time.Second))
		}},
	} {
		for fence, opts := range fenceOpts() {
			t.Run(tc.name+"/"+fence, func(t *testing.T) { tc.test(t, opts) })
		}
	}
}

// testHolderShown: a driver inspecting an advisory lock another driver's
// connection holds sees no token nor fence but the holder's identity, the
// part of the holder's token that names it; a token naming no holder
// leaves it unknown. A released lock is free.
func testHolderShown(t *testing.T, opts Options) {
	ctx := ctxT(t)
	holder, other := openDriver(t, opts), openDriver(t, opts)
	for _, tc := range []struct{ token, want string }{
		{rand.Text() + "~orders~host-1.example~4242~" + "mfx0a1b2c", "~orders~host-1.example~4242"},
		// the same connection, kept: its identity changes
		{"plain-token", ""},
		{rand.Text() + "~billing~host-2~7~y", "~billing~host-2~7"},
	} {
		key := "mysqltest:" + runID + ":holder:" + rand.Text()
		heldBy(t, holder, other, key, tc.token, tc.want)
		if ok, err := holder.Release(ctx, key, tc.token); err != nil || !ok {
			t.Fatalf("Release = %v, %v", ok, err)
		}
		if info, held, err := other.Inspect(ctx, key); err != nil || held {
			t.Errorf("Inspect of a released lock = %+v, %v, %v", info, held, err)
		}
	}
}

// testHolderStale: the key's row names the connection that last
// took the lock through a driver; when another connection holds it,
// having taken it without writing the row (a GET_LOCK by hand, a driver of
// an earlier version), or when the row was written before the server's
// boot (a connection id of an earlier life), the lock is shown held by an
// unknown holder, never by the row's.
func testHolderStale(t *testing.T, opts Options) {
	ctx := ctxT(t)
	d, other := openDriver(t, opts), openDriver(t, opts)
	key := "mysqltest:" + runID + ":stale:" + rand.Text()
	tok := rand.Text() + "~orders~host-1~4242~x"
	if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute}); err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	if ok, err := d.Release(ctx, key, tok); err != nil || !ok {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	db := openDB(t, testutil.MySQLDSN())
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var got, id int64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0), CONNECTION_ID()", lockName(key)).Scan(&got, &id); err != nil || got != 1 {
		t.Fatalf("GET_LOCK by hand = %d, %v", got, err)
	}
	if info, held, err := other.Inspect(ctx, key); err != nil || !held || info.Holder != "" {
		t.Fatalf("Inspect of a lock taken by hand = %+v, %v, %v; want held, holder unknown", info, held, err)
	}
	// the row made to name the connection holding the lock: shown when
	// written after the boot, not when written before
	for _, tc := range []struct {
		takenAt string
		want    string
	}{
		{"UNIX_TIMESTAMP()", "~hand~host-9~9"},
		{"0", ""},
	} {
		setHolderRow(ctx, t, db, opts, key, id, "~hand~host-9~9", tc.takenAt)
		if info, held, err := other.Inspect(ctx, key); err != nil || !held || info.Holder != tc.want {
			t.Errorf("taken_at %s: Inspect = %+v, %v, %v; want held by %q", tc.takenAt, info, held, err, tc.want)
		}
	}
}

// TestAdvisoryHolderOldCounterTable: a counter table made by an earlier
// version (no holder columns) gets them, and its locks then tell their
// holder.
func TestAdvisoryHolderOldCounterTable(t *testing.T) {
	ctx := ctxT(t)
	db := openDB(t, testutil.MySQLDSN())
	table := oldCounterTable(ctx, t, db, "mutexfx_test_oldfence_"+runID)
	key := "mysqltest:" + runID + ":old"
	if _, err := db.ExecContext(ctx, "INSERT INTO "+table+" VALUES (?, 41)", sqlkit.KeyHash(key)); err != nil {
		t.Fatal(err)
	}
	opts := Options{DSN: testutil.MySQLDSN(), Fence: FenceCounter, FenceTable: table}
	d, other := openDriver(t, opts), openDriver(t, opts)
	tok := rand.Text() + "~orders~host-1~4242~x"
	res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute})
	if err != nil || !res.Acquired || res.Fence <= 41 {
		t.Fatalf("Acquire = %+v, %v; want a fence above the row's 41", res, err)
	}
	if info, held, err := other.Inspect(ctx, key); err != nil || !held || info.Holder != "~orders~host-1~4242" {
		t.Fatalf("Inspect = %+v, %v, %v; want held by ~orders~host-1~4242", info, held, err)
	}
}

// TestAdvisoryHolderRefused: a user that may not add the holder columns
// to a counter table of an earlier version, nor create the holder table
// (CREATE on the fence table only: CREATE TABLE IF NOT EXISTS needs it),
// still takes and inspects locks, whose holder is then unknown.
func TestAdvisoryHolderRefused(t *testing.T) {
	ctx := ctxT(t)
	db := openDB(t, testutil.MySQLDSN())
	table := oldCounterTable(ctx, t, db, "mutexfx_test_rofence_"+runID)
	user := "mfx_ro_" + runID
	if _, err := db.ExecContext(ctx, "CREATE USER ?@'%' IDENTIFIED BY 'pw'", user); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.ExecContext(context.Background(), "DROP USER ?@'%'", user) })
	if _, err := db.ExecContext(ctx, "GRANT CREATE, SELECT, INSERT, UPDATE, DELETE ON "+table+" TO ?@'%'", user); err != nil {
		t.Fatal(err)
	}
	cfg, err := gomysql.ParseDSN(testutil.MySQLDSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.User, cfg.Passwd = user, "pw"
	for _, opts := range []Options{
		{DSN: cfg.FormatDSN(), Fence: FenceCounter, FenceTable: table},
		{DSN: cfg.FormatDSN(), Fence: FenceUUIDShort, FenceTable: table},
	} {
		d, other := openDriver(t, opts), openDriver(t, opts)
		key := "mysqltest:" + runID + ":refused:" + opts.Fence
		tok := rand.Text() + "~orders~host-1~4242~x"
		heldBy(t, d, other, key, tok, "")
		if ok, err := d.Release(ctx, key, tok); err != nil || !ok {
			t.Fatalf("%s: Release = %v, %v", opts.Fence, ok, err)
		}
	}
}

// TestAdvisoryHolderGivenPool: on a pool given to NewWithDB (connections
// not known by their sockets) the sequence fence keeps no holder: the lock
// is shown held by an unknown holder; the counter fence's row still tells
// it.
func TestAdvisoryHolderGivenPool(t *testing.T) {
	db := openDB(t, testutil.MySQLDSN())
	for fence, want := range map[string]string{FenceSequence: "", FenceCounter: "~orders~host-1~4242"} {
		opts := fenceOpts()[fence]
		opts.DSN = ""
		d, err := NewWithDB(db, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close(context.Background()) })
		heldBy(t, d, openDriver(t, fenceOpts()[fence]), "mysqltest:"+runID+":given:"+rand.Text(), rand.Text()+"~orders~host-1~4242~x", want)
	}
}
