package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/drivertest"
	"github.com/mutexfx/mutexfx/drivers/internal/sqlkit"
)

// listenRaw opens a connection listening on channel.
func listenRaw(t *testing.T, ctx context.Context, channel string) *pgx.Conn {
	t.Helper()
	c := connectT(t)
	if _, err := c.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestTableReleaseNotifiesHead checks where a table release notifies: with
// drivers queued for the row, on the channel of the one that arrived first
// (by the arrival the row records) and on no other; with none live, on the
// shared channel. NOTIFYs reach a listener in commit order: once a later
// one is heard, an earlier one would have been heard before it.
func TestTableReleaseNotifiesHead(t *testing.T) {
	ctx := ctxT(t)
	opts := Options{Mode: ModeTable}
	a, b, c := shared(t, opts), shared(t, opts), shared(t, opts)
	key := fmt.Sprintf("notify:head:%d", time.Now().UnixNano())
	acquire := func(key string) {
		t.Helper()
		if res, err := a.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "a", TTL: time.Minute}); err != nil || !res.Acquired {
			t.Fatalf("Acquire %s = %+v, %v", key, res, err)
		}
	}
	release := func(key string) {
		t.Helper()
		if ok, err := a.Release(ctx, key, "a"); err != nil || !ok {
			t.Fatalf("Release %s = %v, %v", key, ok, err)
		}
	}
	// the listeners, and b's and c's connections, first: a queued entry
	// lives WaiterLiveness after its last attempt, so b's and c's entries
	// are written just before the release
	lis := map[Driver]*pgx.Conn{b: listenRaw(t, ctx, ownChannel(tableOf(b).id)), c: listenRaw(t, ctx, ownChannel(tableOf(c).id))}
	general := listenRaw(t, ctx, strings.Trim(baseOf(a).names.channel, `"`))
	waitFor(ctx, b, key+":warm")
	waitFor(ctx, c, key+":warm")
	acquire(key)
	waitFor(ctx, b, key)
	waitFor(ctx, c, key)
	var raw []byte
	err := tableOf(a).run(ctx, func(ctx context.Context, p querier) error {
		return p.QueryRow(ctx, "SELECT queue FROM "+baseOf(a).names.table+" WHERE id = $1", sqlkit.KeyHash(key)).Scan(&raw)
	})
	if err != nil {
		t.Fatal(err)
	}
	var queue map[string][2]float64
	if err := json.Unmarshal(raw, &queue); err != nil {
		t.Fatal(err)
	}
	first, second := b, c
	if qb, qc := queue[tableOf(b).id], queue[tableOf(c).id]; qb[0] == 0 || qc[0] == 0 {
		t.Fatalf("queue %s: want drivers %s and %s queued", raw, tableOf(b).id, tableOf(c).id)
	} else if qc[0] < qb[0] || qc[0] == qb[0] && tableOf(c).id < tableOf(b).id {
		first, second = c, b
	}
	release(key)
	heard := func(c *pgx.Conn, what string) string {
		t.Helper()
		n, err := c.WaitForNotification(ctx)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return n.Channel + " " + n.Payload
	}
	if got, want := heard(lis[first], "head"), ownChannel(tableOf(first).id)+" "+key; got != want {
		t.Fatalf("head heard %q; want %q (queue %s)", got, want, raw)
	}
	// a release of a row whose queue holds only a dead entry (a minute
	// old): the shared channel
	dead := key + ":dead"
	stale := fmt.Sprintf(`{"STALEDRIVER": [%d, %d]}`, time.Now().Add(-time.Minute).UnixMilli(), time.Now().Add(-time.Minute).UnixMilli())
	acquire(dead)
	err = tableOf(a).run(ctx, func(ctx context.Context, p querier) error {
		_, err := p.Exec(ctx, "UPDATE "+baseOf(a).names.table+" SET queue = $2::jsonb WHERE id = $1", sqlkit.KeyHash(dead), stale)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	release(dead)
	if got, want := heard(general, "shared channel"), strings.Trim(baseOf(a).names.channel, `"`)+" "+dead; got != want {
		t.Fatalf("shared channel heard %q; want %q", got, want)
	}
	// the marker: a release the second driver is next for, which must be
	// the first thing it hears
	marker := key + ":marker"
	acquire(marker)
	waitFor(ctx, second, marker)
	release(marker)
	if got, want := heard(lis[second], "second driver"), ownChannel(tableOf(second).id)+" "+marker; got != want {
		t.Fatalf("second driver heard %q first; want %q (it was not next for the first release)", got, want)
	}
}

// TestTableWaiterWokenByItsChannel checks that a release hands the lock
// on to the waiting table-mode acquisition that is next for it, the
// waiter's polls put off past its wait. A waiter that registered for a
// grant (grants) holds the row once the release returns, before
// it sends anything, and learns it on its grant channel. One that could
// not register (a token too long for a NOTIFY payload) is woken on its
// own channel (TestTableReleaseNotifiesHead) and takes its turn. The same
// for a handover, which releases when a driver queues.
func TestTableWaiterWokenByItsChannel(t *testing.T) {
	defer func(f func(time.Duration) time.Duration) { pollDelay = f }(pollDelay)
	pollDelay = func(time.Duration) time.Duration { return time.Hour }
	for _, call := range []string{"release", "handover"} {
		for _, grant := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/grant=%v", call, grant), func(t *testing.T) { waiterWokenByItsChannel(t, call, grant) })
		}
	}
}

func waiterWokenByItsChannel(t *testing.T, call string, grant bool) {
	ctx := ctxT(t)
	opts := Options{Mode: ModeTable}
	a, b := shared(t, opts), shared(t, opts)
	key := fmt.Sprintf("notify:wake:%d", time.Now().UnixNano())
	token := "b"
	if !grant {
		token = strings.Repeat("b", maxPayload)
	}
	if res, err := a.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "a", TTL: time.Minute}); err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	// b's listener connects in the background: a waiting acquisition
	// starts it; wait until it hears its own channel
	waitFor(ctx, b, key)
	probe := key + ":probe"
	w, unwatch := tableOf(b).watch(probe)
	defer unwatch()
	within(t, 5*time.Second, "listener ready", func() bool {
		err := tableOf(a).run(ctx, func(ctx context.Context, p querier) error {
			_, err := p.Exec(ctx, "SELECT pg_notify($1, $2)", ownChannel(tableOf(b).id), probe)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-w:
			return true
		case <-time.After(20 * time.Millisecond):
			return false
		}
	})
	woken, unwatchKey := tableOf(b).watch(key) // fed by what wakes the waiter
	defer unwatchKey()
	got := drivertest.AcquireAsync(ctx, b, drivers.AcquireRequest{Key: key, Token: token, TTL: time.Minute, Wait: 10 * time.Second})
	waitQueued(ctx, t, a, b, key)
	if grant { // the entry registers at the waiter's first write
		within(t, 5*time.Second, "registered", func() bool { return queueEntry(ctx, t, a, b, key)[2] == token })
	}
	for len(woken) > 0 { // drop any wake-up heard before the release
		<-woken
	}
	released := time.Now()
	if call == "release" {
		if ok, err := a.Release(ctx, key, "a"); err != nil || !ok {
			t.Fatalf("Release = %v, %v", ok, err)
		}
	} else if ok, res, err := a.Handover(ctx, key, "a", drivers.AcquireRequest{Key: key, Token: "a2", TTL: time.Minute}); err != nil || !ok || res.Acquired {
		t.Fatalf("Handover = %v, %+v, %v; want released, not handed", ok, res, err)
	}
	info, held, err := a.Inspect(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if grant {
		if !held || info.Token != token {
			t.Fatalf("after the %s the row is %+v (held %v); want granted to the waiter's token", call, info, held)
		}
	} else {
		select {
		case <-woken:
		case <-time.After(5 * time.Second):
			t.Fatal("the release was not heard on the waiter's channel")
		}
	}
	r := <-got
	if r.Err != nil || !r.Res.Acquired {
		t.Fatalf("waiting Acquire = %+v, %v", r.Res, r.Err)
	}
	if grant && r.Res.Fence != info.Fence {
		t.Fatalf("granted fence %d; the row holds %d", r.Res.Fence, info.Fence)
	}
	// Without the wake-up its only other attempt is at the wait's end.
	if d := r.At.Sub(released); d > 5*time.Second {
		t.Fatalf("the waiter got the lock %v after the release: at its wait's end, not woken", d)
	}
}

// queueEntry returns b's entry in the queue of key's row, read through a,
// as strings (nil: none).
func queueEntry(ctx context.Context, t *testing.T, a, b Driver, key string) []string {
	t.Helper()
	var entry []string
	err := tableOf(a).run(ctx, func(ctx context.Context, p querier) error {
		return ignoreNoRows(p.QueryRow(ctx, "SELECT array(SELECT jsonb_array_elements_text(queue->$2)) FROM "+
			baseOf(a).names.table+" WHERE id = $1", sqlkit.KeyHash(key), tableOf(b).id).Scan(&entry))
	})
	if err != nil {
		t.Fatal(err)
	}
	return append(entry, "", "", "", "", "")[:5]
}

// acquirer returns a function acquiring key for a minute as token,
// waiting up to wait, that fails the test on an error.
func acquirer(t *testing.T, ctx context.Context, key string) func(d Driver, token string, wait time.Duration) drivers.AcquireResult {
	return func(d Driver, token string, wait time.Duration) drivers.AcquireResult {
		t.Helper()
		res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: token, TTL: time.Minute, Wait: wait})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
}

// TestTableQueueDeferred checks that a waiting acquisition that finds the
// row released to a queued driver does not write to the row (queueing
// then would make that driver's take wait for its commit) for up to
// queueDeferral, and queues once the row is taken, or after that.
func TestTableQueueDeferred(t *testing.T) {
	ctx := ctxT(t)
	opts := Options{Mode: ModeTable}
	a, b, c := shared(t, opts), shared(t, opts), shared(t, opts)
	key := fmt.Sprintf("queue:deferred:%d", time.Now().UnixNano())
	row := func() (version string, queue map[string]any) {
		t.Helper()
		var raw []byte
		err := tableOf(a).run(ctx, func(ctx context.Context, p querier) error {
			return p.QueryRow(ctx, "SELECT xmin::text, queue FROM "+baseOf(a).names.table+" WHERE id = $1", sqlkit.KeyHash(key)).Scan(&version, &raw)
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &queue); err != nil {
			t.Fatal(err)
		}
		return version, queue
	}
	wait := acquirer(t, ctx, key)
	for _, phase := range []string{"the queued driver takes", "the deferral ends"} {
		t.Run(phase, func(t *testing.T) {
			if res := wait(a, "a", 0); !res.Acquired {
				t.Fatalf("Acquire = %+v", res)
			}
			if res := wait(b, "b", time.Millisecond); res.Acquired {
				t.Fatal("b acquired a held lock")
			}
			if ok, err := a.Release(ctx, key, "a"); err != nil || !ok {
				t.Fatalf("Release = %v, %v", ok, err)
			}
			before, _ := row()
			if phase == "the deferral ends" {
				if res := wait(c, "c", 3*queueDeferral); res.Acquired {
					t.Fatal("c acquired a lock released to b")
				}
				if _, q := row(); q[tableOf(c).id] == nil {
					t.Fatalf("after %v c is not queued: %v", 3*queueDeferral, q)
				}
			} else {
				// a deferral longer than c's wait, however slow the
				// machine
				defer func(d time.Duration) { queueDeferral = d }(queueDeferral)
				queueDeferral = time.Minute
				if res := wait(c, "c", 20*time.Millisecond); res.Acquired {
					t.Fatal("c acquired a lock released to b")
				}
				if after, q := row(); after != before {
					t.Fatalf("c wrote to the row (version %s → %s, queue %v) while it was b's to take", before, after, q)
				}
				if res := wait(b, "b", time.Millisecond); !res.Acquired {
					t.Fatalf("b, queued first, did not take the released row: %+v", res)
				}
				if res := wait(c, "c", time.Millisecond); res.Acquired {
					t.Fatal("c acquired a lock b holds")
				}
				if _, q := row(); q[tableOf(c).id] == nil {
					t.Fatalf("c did not queue once b took the row: %v", q)
				}
				if ok, err := b.Release(ctx, key, "b"); err != nil || !ok {
					t.Fatalf("Release = %v, %v", ok, err)
				}
			}
			// empty the queue for the next phase: c takes (it is next
			// or alone once b's entry is gone) and releases
			within(t, 2*WaiterLiveness, "c takes", func() bool { return wait(c, "c", 10*time.Millisecond).Acquired })
			if ok, err := c.Release(ctx, key, "c"); err != nil || !ok {
				t.Fatalf("Release = %v, %v", ok, err)
			}
			within(t, 2*WaiterLiveness, "queue empty", func() bool {
				if res := wait(a, "a", 0); res.Acquired {
					_, _ = a.Release(ctx, key, "a")
					return true
				}
				return false
			})
		})
	}
}

// TestTableDeferredArrival: a waiting acquisition that deferred queueing
// queues, once the row is taken, with the arrival of its first attempt:
// before the drivers that arrived while it deferred.
func TestTableDeferredArrival(t *testing.T) {
	ctx := ctxT(t)
	opts := Options{Mode: ModeTable}
	a, b, c := shared(t, opts), shared(t, opts), shared(t, opts)
	key := fmt.Sprintf("queue:arrival:%d", time.Now().UnixNano())
	acquire := acquirer(t, ctx, key)
	if !acquire(a, "a", 0).Acquired || acquire(b, "b", time.Millisecond).Acquired {
		t.Fatal("a did not take the lock, or b did not queue")
	}
	if ok, err := a.Release(ctx, key, "a"); err != nil || !ok {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	req := drivers.AcquireRequest{Key: key, Token: "c", TTL: time.Minute}
	o := attemptOpts{queue: true, deferQueue: true}
	if res, deferred, err := tableOf(c).acquireOnce(ctx, req, &o); err != nil || res.Acquired || !deferred || o.arrival == nil {
		t.Fatalf("acquireOnce = %+v, deferred %v, %v, arrival %v; want deferred, with its arrival", res, deferred, err, o.arrival)
	}
	if !acquire(b, "b", time.Millisecond).Acquired {
		t.Fatal("b, queued first, did not take the released row")
	}
	if res, deferred, err := tableOf(c).acquireOnce(ctx, req, &o); err != nil || res.Acquired || deferred {
		t.Fatalf("acquireOnce = %+v, deferred %v, %v; want queued", res, deferred, err)
	}
	var arrival float64
	err := tableOf(a).run(ctx, func(ctx context.Context, p querier) error {
		return p.QueryRow(ctx, "SELECT (queue->$2->>0)::float8 FROM "+baseOf(a).names.table+" WHERE id = $1", sqlkit.KeyHash(key), tableOf(c).id).Scan(&arrival)
	})
	if err != nil || arrival != *o.arrival {
		t.Fatalf("c's arrival %v, %v; want its first attempt's, %v", arrival, err, *o.arrival)
	}
}

// TestTableReleaseWhenNotifyFails: a release, or a handover that
// releases (a driver queues), whose wake-up fails still frees the lock:
// with the server's notification queue full (SQLSTATE 54000) or the wake
// function not allowed (42501), both raised here by a stand-in wake
// function, it runs again without the wake-up and the waiter gets the lock
// by its polls; with the function dropped (42883) the driver makes it
// again and the release wakes the waiter.
func TestTableReleaseWhenNotifyFails(t *testing.T) {
	for _, call := range []string{"release", "handover"} {
		for _, code := range []string{"54000", "42501", "42883"} {
			t.Run(call+"/"+code, func(t *testing.T) { releaseWhenNotifyFails(t, call, code) })
		}
	}
}

func releaseWhenNotifyFails(t *testing.T, call, code string) {
	ctx := ctxT(t)
	opts := Options{Mode: ModeTable, Table: "mutexfx_notify_fails"}
	a, b := shared(t, opts), shared(t, opts)
	key := fmt.Sprintf("notify:fails:%d", time.Now().UnixNano())
	if res, err := a.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "a", TTL: time.Minute}); err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	exec := func(sql string) {
		t.Helper()
		if err := tableOf(a).run(ctx, func(ctx context.Context, p querier) error {
			_, err := p.Exec(ctx, sql)
			return err
		}); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	got := drivertest.AcquireAsync(ctx, b, drivers.AcquireRequest{Key: key, Token: "b", TTL: time.Minute, Wait: 10 * time.Second})
	waitQueued(ctx, t, a, b, key)
	// now, both drivers having made the schema: a gone function is
	// noticed by the release
	wake := baseOf(a).names.wake
	if code == "42883" {
		exec("DROP FUNCTION " + wake + wakeArgs)
	} else {
		exec("CREATE OR REPLACE FUNCTION " + wake + "(queue jsonb, token text, fence bigint, key text, live bigint, shared text) RETURNS boolean " +
			"LANGUAGE plpgsql AS $f$ BEGIN RAISE EXCEPTION 'stand-in' USING ERRCODE = '" + code + "'; END $f$")
		// made again at the next driver's start
		t.Cleanup(func() { exec("DROP FUNCTION " + wake + wakeArgs) })
	}
	if call == "release" {
		if ok, err := a.Release(ctx, key, "a"); !ok || err != nil {
			t.Fatalf("Release with the wake-up failing (%s) = %v, %v; want true", code, ok, err)
		}
	} else {
		released, res, err := a.Handover(ctx, key, "a", drivers.AcquireRequest{Key: key, Token: "a2", TTL: time.Minute})
		if !released || res.Acquired || err != nil {
			t.Fatalf("Handover with a driver queued and the wake-up failing (%s) = %v, %+v, %v; want released, not handed", code, released, res, err)
		}
	}
	if r := <-got; r.Err != nil || !r.Res.Acquired {
		t.Fatalf("waiting Acquire = %+v, %v", r.Res, r.Err)
	}
}

// wakeArgs are the wake function's argument types.
const wakeArgs = "(jsonb, text, bigint, text, bigint, text)"

// waitQueued waits until driver b is in the queue of key's row, read
// through driver a.
func waitQueued(ctx context.Context, t *testing.T, a, b Driver, key string) {
	t.Helper()
	within(t, 5*time.Second, "queued", func() bool {
		var queued bool
		err := tableOf(a).run(ctx, func(ctx context.Context, p querier) error {
			return p.QueryRow(ctx, "SELECT coalesce(queue ? $2, false) FROM "+
				baseOf(a).names.table+" WHERE id = $1", sqlkit.KeyHash(key), tableOf(b).id).Scan(&queued)
		})
		if err != nil {
			t.Fatal(err)
		}
		return queued
	})
}
