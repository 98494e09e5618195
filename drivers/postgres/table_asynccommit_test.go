package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestTableAsyncCommits checks which table-mode commits wait for the WAL
// flush in a logged table (asyncHint): a take does; a waiting attempt's
// queue entry and a release do not, the next take flushing them. On a
// throwaway server whose walwriter writes late, an asynchronous commit
// leaves the WAL flushed behind its insert position.
func TestTableAsyncCommits(t *testing.T) {
	srv := testutil.StartPostgres(t)
	ctx := ctxT(t)
	c, err := pgx.Connect(ctx, srv.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	for _, s := range []string{"ALTER SYSTEM SET wal_writer_delay = '10s'", "ALTER SYSTEM SET wal_writer_flush_after = 0",
		"ALTER SYSTEM SET autovacuum = off", "SELECT pg_reload_conf()"} {
		if _, err := c.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	d := on(t, srv.DSN, Options{Mode: ModeTable})
	acquire := func(key, tok string, wait time.Duration, want bool) func() error {
		return func() error {
			res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute, Wait: wait})
			if err == nil && res.Acquired != want {
				t.Fatalf("%s %s: Acquired = %v; want %v", key, tok, res.Acquired, want)
			}
			return err
		}
	}
	release := func(key, tok string) func() error {
		return func() error {
			ok, err := d.Release(ctx, key, tok)
			if err == nil && !ok {
				t.Fatalf("%s %s: not released", key, tok)
			}
			return err
		}
	}
	for _, step := range []struct {
		name      string
		run       func() error
		unflushed bool
	}{
		{"take", acquire("a", "holder", 0, true), false},
		{"waiting attempt, queued", acquire("a", "waiter", time.Millisecond, false), true},
		{"take of another lock", acquire("b", "t1", 0, true), false},
		// nobody queued for it: the release is the one statement
		{"release of that lock", release("b", "t1"), true},
		{"its take again", acquire("b", "t2", 0, true), false},
		{"release with a waiter (and its NOTIFY)", release("a", "holder"), true},
		{"the queued waiter's take", acquire("a", "waiter", 0, true), false},
	} {
		if err := step.run(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		var unflushed bool
		if err := c.QueryRow(ctx, "SELECT pg_current_wal_flush_lsn() < pg_current_wal_insert_lsn()").Scan(&unflushed); err != nil {
			t.Fatal(err)
		}
		if unflushed != step.unflushed {
			t.Errorf("after %s: WAL unflushed = %v; want %v", step.name, unflushed, step.unflushed)
		}
	}
}
