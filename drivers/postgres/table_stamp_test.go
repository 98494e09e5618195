package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/sqlkit"
)

// entryAge reads, on c, the age in ms (server clock, now) of driver id's
// queue entry in key's row, and its stamp; ok false when it has none.
func entryAge(ctx context.Context, t *testing.T, c *pgx.Conn, key, id string) (age, stamp float64, ok bool) {
	t.Helper()
	err := c.QueryRow(ctx, "SELECT extract(epoch FROM clock_timestamp()) * 1000 - (queue->$2->>1)::float8, (queue->$2->>1)::float8 "+
		"FROM mutexfx_locks WHERE id = $1 AND queue ? $2", sqlkit.KeyHash(key), id).Scan(&age, &stamp)
	if err == pgx.ErrNoRows {
		return 0, 0, false
	}
	if err != nil {
		t.Fatalf("entry of %s: %v", id, err)
	}
	return age, stamp, true
}

// TestTableWaiterStampGap: a waiting component keeps its queue entry
// stamped about every WaiterLiveness/4, leaving three quarters of the
// liveness for stalls (a busy server, a row lock wait) before a later
// arrival could overtake it. An attempt under WaiterLiveness/4 after the
// last stamp writes nothing, so a waiter that paced its attempts by the
// poll alone went up to two polls unstamped (200 ms of 400: seen as
// overtakes under load), not one: its next attempt now comes when the
// stamp falls due. The bound leaves 80 ms for a loaded test machine.
func TestTableWaiterStampGap(t *testing.T) {
	ctx := ctxT(t)
	name := fmt.Sprintf("stampgap-%d", time.Now().UnixNano())
	key := "fault:" + name
	h, w := shared(t, Options{Mode: ModeTable}), shared(t, Options{Mode: ModeTable})
	if res, err := h.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "h", TTL: 30 * time.Second}); err != nil || !res.Acquired {
		t.Fatalf("h acquire = %+v, %v", res, err)
	}
	m := mutexOn(t, w, 600*time.Millisecond) // blocking waits of ttl/3 = 200 ms
	done := make(chan error, 1)
	go func() {
		l, err := m.Acquire(ctx, name, component.WithTimeout(20*time.Second))
		if err == nil {
			_, _ = l.Release(context.WithoutCancel(ctx))
		}
		done <- err
	}()
	c := connectT(t)
	id := tableOf(w).id
	within(t, 5*time.Second, "w queued", func() bool { _, _, ok := entryAge(ctx, t, c, key, id); return ok })
	var maxAge, last float64
	var gaps []float64
	tick := time.NewTicker(2 * time.Millisecond) // sampling the row: it sends no signal
	defer tick.Stop()
	for end := time.Now().Add(2500 * time.Millisecond); time.Now().Before(end); <-tick.C {
		age, stamp, ok := entryAge(ctx, t, c, key, id)
		if !ok {
			t.Fatal("w's entry vanished while it waited")
		}
		maxAge = max(maxAge, age)
		if stamp != last {
			if last != 0 {
				gaps = append(gaps, stamp-last)
			}
			last = stamp
		}
	}
	if _, err := h.Release(ctx, key, "h"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Logf("stamp gaps (ms): %.0f; max age %.0f ms", gaps, maxAge)
	if limit := float64((WaiterLiveness/4 + 80*time.Millisecond).Milliseconds()); maxAge > limit {
		t.Fatalf("w's entry went %.0f ms unstamped (want ≤ %.0f): only %.0f ms of the %v liveness left for stalls",
			maxAge, limit, float64(WaiterLiveness.Milliseconds())-maxAge, WaiterLiveness)
	}
}
