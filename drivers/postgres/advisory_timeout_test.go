package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestGrantAtLockTimeout: PostgreSQL can grant an advisory lock to a
// waiting session just as its lock_timeout fires; the statement fails, the
// session keeps the lock. The driver must not keep it unseen (held by a
// session it reuses, which no one else could ever take). The race is
// timed: another session releases the lock around the moment the wait
// times out, the release time moving to find the edge.
func TestGrantAtLockTimeout(t *testing.T) {
	ctx := ctxT(t)
	d := shared(t, Options{MaxSessions: 2})
	holder, err := pgx.Connect(ctx, testutil.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(context.WithoutCancel(ctx))
	key := fmt.Sprintf("timeout:grant:%d", time.Now().UnixNano())
	h := advisoryKey(key)
	const wait = 20 * time.Millisecond
	offset := wait
	for i := range 300 {
		if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock($1)", h); err != nil {
			t.Fatal(err)
		}
		got := make(chan drivers.AcquireResult, 1)
		tok := fmt.Sprint("tok", i)
		start := time.Now()
		go func() {
			res, _ := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute, Wait: wait})
			got <- res
		}()
		time.Sleep(time.Until(start.Add(offset))) // the race's timing, not a synchronisation
		if _, err := holder.Exec(ctx, "SELECT pg_advisory_unlock($1)", h); err != nil {
			t.Fatal(err)
		}
		if res := <-got; res.Acquired {
			offset += 200 * time.Microsecond
			if ok, err := d.Release(ctx, key, tok); err != nil || !ok {
				t.Fatalf("Release = %v, %v", ok, err)
			}
			continue
		}
		offset -= 100 * time.Microsecond
		// not acquired: then nobody may hold the lock now
		var free bool
		if err := holder.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", h).Scan(&free); err != nil {
			t.Fatal(err)
		}
		if !free {
			t.Fatalf("iteration %d: Acquire answered not acquired, yet a session of the driver holds the lock", i)
		}
		if _, err := holder.Exec(ctx, "SELECT pg_advisory_unlock($1)", h); err != nil {
			t.Fatal(err)
		}
	}
}
