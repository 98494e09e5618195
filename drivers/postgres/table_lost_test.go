package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/sqlkit"
	"github.com/mutexfx/mutexfx/drivers/internal/sqltest"
)

// TestTableTakeAnswerLost: a waiting table-mode acquisition whose taking
// statement commits but whose answer the link loses (reset after the
// commit) reads its row back and returns the lock it took. An error would
// have made its component release the lock and ask again as a new arrival:
// the statement that took the lock dropped the waiter's queue entry, so it
// went to the back of the queue.
func TestTableTakeAnswerLost(t *testing.T) {
	ctx := ctxT(t)
	p, dsn := proxied(t)
	h := shared(t, Options{Mode: ModeTable})
	w := on(t, dsn, Options{Mode: ModeTable, MaxConns: 1}) // one connection: the one the link loses
	key := fmt.Sprintf("lost:%s:%d", t.Name(), time.Now().UnixNano())
	id := sqlkit.KeyHash(key)
	if res, err := h.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "h", TTL: time.Minute}); err != nil || !res.Acquired {
		t.Fatalf("h Acquire = %+v, %v", res, err)
	}
	type answer struct {
		res drivers.AcquireResult
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		res, err := w.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "w", TTL: time.Minute, Wait: 20 * time.Second})
		answered <- answer{res, err}
	}()
	admin := connectT(t)
	within(t, 5*time.Second, "w queued", func() bool { _, _, ok := entryAge(ctx, t, admin, key, tableOf(w).id); return ok })

	// x frees the row (as a release that wakes no one) and keeps it locked:
	// w's next stamp, due every WaiterLiveness/4, waits for x's commit,
	// then takes the lock
	x, err := connectT(t).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var xpid uint32
	if err := x.QueryRow(ctx, "UPDATE mutexfx_locks SET token = '', expires_at = 'epoch' WHERE id = $1 RETURNING pg_backend_pid()", id).Scan(&xpid); err != nil {
		t.Fatal(err)
	}
	within(t, 5*time.Second, "w's statement waiting for x", func() bool {
		var n int
		err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))", xpid).Scan(&n)
		return err == nil && n > 0
	})
	p.Stall()
	if err := x.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	within(t, 5*time.Second, "w's answer held back", func() bool { return p.Blocked() > 0 })
	var token string
	var fence uint64
	if err := admin.QueryRow(ctx, "SELECT token, fence FROM mutexfx_locks WHERE id = $1", id).Scan(&token, &fence); err != nil || token != "w" {
		t.Fatalf("row = %q, %v; want taken by w's statement", token, err)
	}
	p.Reset() // the answer is lost
	p.Resume()
	got := <-answered
	if got.err != nil || !got.res.Acquired || got.res.Fence != fence {
		t.Fatalf("w Acquire = %+v, %v; want the lock its statement took (fence %d)", got.res, got.err, fence)
	}
}

// TestTableHandoverAnswerLost: a Release handing the lock to a waiter of
// the same Mutex whose handover UPDATE commits but whose answer the link
// loses leaves the waiter to get the lock at once (sqltest).
func TestTableHandoverAnswerLost(t *testing.T) {
	p, dsn := proxied(t)
	// ttl: no periodic renewal (every ttl/3) runs on the one connection,
	// where it could be the UPDATE found waiting for the row lock
	const ttl = 60 * time.Second
	admin := connectT(t)
	sqltest.HandoverAnswerLost(ctxT(t), t, sqltest.LostHandover{
		Driver: on(t, dsn, Options{Mode: ModeTable, MaxConns: 1}),
		Prefix: "fault:",
		Name:   fmt.Sprintf("handlost:%d", time.Now().UnixNano()),
		Proxy:  p,
		TTL:    ttl,
		LockRow: func(ctx context.Context, key string) (func() error, func() bool) {
			x, err := connectT(t).Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var xpid uint32
			if err := x.QueryRow(ctx, "SELECT pg_backend_pid() FROM mutexfx_locks WHERE id = $1 FOR UPDATE", sqlkit.KeyHash(key)).Scan(&xpid); err != nil {
				t.Fatal(err)
			}
			return func() error { return x.Commit(ctx) }, func() bool {
				var n int
				err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid)) "+
					"AND query LIKE '%(token, fence, expires_at, queue) =%'", xpid).Scan(&n) // the handover
				return err == nil && n > 0
			}
		},
		Token: func(ctx context.Context, key string) (tok string, err error) {
			err = admin.QueryRow(ctx, "SELECT coalesce((SELECT token FROM mutexfx_locks WHERE id = $1 AND expires_at > now()), '')", sqlkit.KeyHash(key)).Scan(&tok)
			return tok, err
		},
	})
}
