package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/drivertest"
	"github.com/mutexfx/mutexfx/drivers/internal/sqlkit"
)

// TestTableRowInsertedMeanwhile: a waiting Acquire whose statement meets a
// row another transaction inserted after the statement's snapshot (its
// INSERT waits for that commit and goes on to the conflict) queues in that
// row; it does not sit out a poll unqueued while others take turns. Its
// polls are put off past the test.
func TestTableRowInsertedMeanwhile(t *testing.T) {
	defer func(f func(time.Duration) time.Duration) { pollDelay = f }(pollDelay)
	pollDelay = func(time.Duration) time.Duration { return time.Hour }
	ctx := ctxT(t)
	d := shared(t, Options{Mode: ModeTable})
	key := fmt.Sprintf("meanwhile:%d", time.Now().UnixNano())
	// the schema in place
	if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key + ":x", Token: "x", TTL: time.Second}); err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	admin := connectT(t)
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "INSERT INTO mutexfx_locks (id, name, token, fence, expires_at) VALUES ($1, $2, 'other', 1, now() + interval '1 minute')",
		sqlkit.KeyHash(key), key); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	got := drivertest.AcquireAsync(wctx, d, drivers.AcquireRequest{Key: key, Token: "w", TTL: time.Minute, Wait: 30 * time.Second})
	defer func() { stop(); <-got }() // before pollDelay is restored
	watcher := connectT(t)
	within(t, 10*time.Second, "the waiter's statement waits for the insert", func() bool {
		var n int
		err := watcher.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()").Scan(&n)
		return err == nil && n > 0
	})
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	within(t, 2*time.Second, "the waiter queues", func() bool {
		var in bool
		err := watcher.QueryRow(ctx, "SELECT coalesce(queue ? $2, false) FROM mutexfx_locks WHERE id = $1", sqlkit.KeyHash(key), tableOf(d).id).Scan(&in)
		return err == nil && in
	})
}
