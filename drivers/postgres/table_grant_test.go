package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/sqlkit"
)

// setQueue replaces the queue of key's row, through d.
func setQueue(ctx context.Context, t *testing.T, d Driver, key, queue string) {
	t.Helper()
	err := tableOf(d).run(ctx, func(ctx context.Context, p querier) error {
		_, err := p.Exec(ctx, "UPDATE "+baseOf(d).names.table+" SET queue = $2::jsonb WHERE id = $1", sqlkit.KeyHash(key), queue)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestTableGrantNeedsLiveListener checks whom a release grants the row to:
// the head of its queue when it registered with the pid of a live backend
// (its driver's LISTEN connection), with the next fence and its ttl; no
// one when that backend is gone (a crashed waiter), nor when the head did
// not register, nor to the releasing token's own entry.
func TestTableGrantNeedsLiveListener(t *testing.T) {
	ctx := ctxT(t)
	a := shared(t, Options{Mode: ModeTable})
	live := connectT(t).PgConn().PID()
	now := time.Now().UnixMilli()
	for _, c := range []struct {
		name, queue string
		granted     bool
	}{
		{"live", fmt.Sprintf(`{"W": [%d, %d, "w", 60000, %d]}`, now, now+time.Hour.Milliseconds(), live), true},
		{"crashed", fmt.Sprintf(`{"W": [%d, %d, "w", 60000, 2147483000]}`, now, now+time.Hour.Milliseconds()), false},
		{"unregistered", fmt.Sprintf(`{"W": [%d, %d]}`, now, now+time.Hour.Milliseconds()), false},
		{"own entry", fmt.Sprintf(`{"W": [%d, %d, "a", 60000, %d]}`, now, now+time.Hour.Milliseconds(), live), false},
		{"dead entry first", fmt.Sprintf(`{"D": [%d, 0, "d", 60000, %d], "W": [%d, %d, "w", 60000, %d]}`,
			now-1000, live, now, now+time.Hour.Milliseconds(), live), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			key := fmt.Sprintf("grant:%s:%d", c.name, time.Now().UnixNano())
			res, err := a.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "a", TTL: time.Minute})
			if err != nil || !res.Acquired {
				t.Fatalf("Acquire = %+v, %v", res, err)
			}
			setQueue(ctx, t, a, key, c.queue)
			if ok, err := a.Release(ctx, key, "a"); err != nil || !ok {
				t.Fatalf("Release = %v, %v", ok, err)
			}
			info, held, err := a.Inspect(ctx, key)
			switch {
			case err != nil:
				t.Fatal(err)
			case c.granted && (!held || info.Token != "w" || info.Fence <= res.Fence || info.TTL < 50*time.Second):
				t.Fatalf("after the release: %+v (held %v); want granted to w, fence above %d, ttl about a minute", info, held, res.Fence)
			case !c.granted && held:
				t.Fatalf("after the release: %+v; want free", info)
			}
		})
	}
}

// TestTableLeave checks that a waiting call whose wait ends without the
// lock unregisters, keeping its driver's place (a release then wakes the
// driver, granting nothing), and that a call granted the lock as its wait
// ended releases it when it leaves.
func TestTableLeave(t *testing.T) {
	ctx := ctxT(t)
	opts := Options{Mode: ModeTable}
	a, b := shared(t, opts), shared(t, opts)
	key := fmt.Sprintf("grant:leave:%d", time.Now().UnixNano())
	if res, err := a.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "a", TTL: time.Minute}); err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	// b's listener connects in the background: wait until its calls register
	within(t, 5*time.Second, "registered", func() bool {
		waitFor(ctx, b, key+":warm") // a waiting call starts the listener
		return tableOf(b).registration(drivers.AcquireRequest{Token: "b"}) != nil
	})
	if res, err := b.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "b", TTL: time.Minute, Wait: 50 * time.Millisecond}); err != nil || res.Acquired {
		t.Fatalf("waiting Acquire = %+v, %v; want not acquired", res, err)
	}
	if e := queueEntry(ctx, t, a, b, key); e[0] == "" || e[2] != "" {
		t.Fatalf("b's entry after its wait: %q; want kept, unregistered", e)
	}
	if ok, err := a.Release(ctx, key, "a"); err != nil || !ok {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	if info, held, err := a.Inspect(ctx, key); err != nil || held {
		t.Fatalf("after the release: %+v, %v, %v; want free (nothing granted to an ended call)", info, held, err)
	}
	// a grant that reached b's entry as the call's wait ended (b's live
	// entry, which keeps the row for b, dropped first)
	setQueue(ctx, t, a, key, "{}")
	if res, err := a.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "a2", TTL: time.Minute}); err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	now := time.Now().UnixMilli()
	setQueue(ctx, t, a, key, fmt.Sprintf(`{%q: [%d, %d, "b2", 60000, %d]}`, tableOf(b).id, now, now+time.Hour.Milliseconds(), connectT(t).PgConn().PID()))
	if ok, err := a.Release(ctx, key, "a2"); err != nil || !ok {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	if info, held, err := a.Inspect(ctx, key); err != nil || !held || info.Token != "b2" {
		t.Fatalf("after the release: %+v, %v, %v; want granted to b2", info, held, err)
	}
	tableOf(b).leave(ctx, drivers.AcquireRequest{Key: key, Token: "b2"})
	if info, held, err := a.Inspect(ctx, key); err != nil || held {
		t.Fatalf("after b2 left: %+v, %v, %v; want free", info, held, err)
	}
}
