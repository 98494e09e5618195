package mysql

import (
	"strings"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// rowOf reads key's row token and remaining ttl.
func rowOf(t *testing.T, d Driver, key string) (token string, ttl time.Duration) {
	t.Helper()
	var us int64
	if err := coreOf(d).db.QueryRowContext(ctxT(t), "SELECT token, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) FROM "+
		tab(d).s.table+" WHERE name_hash = ?", keyHash(key)).Scan(&token, &us); err != nil {
		t.Fatal(err)
	}
	return token, time.Duration(us) * time.Microsecond
}

// TestTableGrant: a release passes the row to the live head of its queue
// (a grant token, the next fence); the head's driver owns it at its next
// attempt, once, under the attempt's token (Inspect through it, Release),
// and its first Extend writes that token into the row. A grant shorter
// than the attempt's ttl is extended at the claim.
func TestTableGrant(t *testing.T) {
	ctx := ctxT(t)
	opts := Options{DSN: testutil.MySQLDSN(), Mode: ModeTable, Table: "mutexfx_test_locks", WaiterLiveness: 10 * time.Second}
	a, b := openDriver(t, opts), openDriver(t, opts)
	for _, c := range []struct {
		name       string
		ttlA, ttlB time.Duration
	}{{"long enough", 10 * time.Second, 10 * time.Second}, {"too short", time.Second, 30 * time.Second}} {
		key := "mysqltest:" + runID + ":" + t.Name() + ":" + c.name
		ta, tb, tc := token(), token(), token()
		resA, err := a.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: ta, TTL: c.ttlA})
		if err != nil || !resA.Acquired {
			t.Fatalf("%s: a acquire = %+v, %v", c.name, resA, err)
		}
		if res, err := b.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: token(), TTL: c.ttlB}); err != nil || res.Acquired {
			t.Fatalf("%s: b acquire = %+v, %v; want queued", c.name, res, err)
		}
		if ok, err := a.Release(ctx, key, ta); err != nil || !ok {
			t.Fatalf("%s: a release = %v, %v", c.name, ok, err)
		}
		if row, ttl := rowOf(t, a, key); !strings.HasPrefix(row, grantPrefix) || ttl < c.ttlA {
			t.Fatalf("%s: row after release: %q for %v, want a grant for at least %v", c.name, row, ttl, c.ttlA)
		}
		if res, err := a.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: token(), TTL: c.ttlA}); err != nil || res.Acquired {
			t.Fatalf("%s: a acquire after its release = %+v, %v; want granted to b", c.name, res, err)
		}
		resB, err := b.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tb, TTL: c.ttlB})
		if err != nil || !resB.Acquired || resB.Fence <= resA.Fence {
			t.Fatalf("%s: b acquire = %+v, %v; want acquired with a fence above %d", c.name, resB, err, resA.Fence)
		}
		if res, err := b.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tc, TTL: c.ttlB}); err != nil || res.Acquired {
			t.Fatalf("%s: second claim through b = %+v, %v", c.name, res, err)
		}
		if info, ok, err := b.Inspect(ctx, key); err != nil || !ok || info.Token != tb {
			t.Fatalf("%s: Inspect through b = %+v, %v, %v; want token %q", c.name, info, ok, err, tb)
		}
		if _, ttl := rowOf(t, a, key); ttl < c.ttlB-time.Second {
			t.Fatalf("%s: b's lock lasts %v, asked %v", c.name, ttl, c.ttlB)
		}
		if ok, err := b.Extend(ctx, key, tb, c.ttlB); err != nil || !ok {
			t.Fatalf("%s: b extend = %v, %v", c.name, ok, err)
		}
		if row, _ := rowOf(t, a, key); row != tb {
			t.Fatalf("%s: row token after Extend %q, want b's", c.name, row)
		}
		if ok, err := b.Release(ctx, key, tb); err != nil || !ok {
			t.Fatalf("%s: b release = %v, %v", c.name, ok, err)
		}
	}
}

// TestGrantsClaim: a grant is claimed once, and never after it was given
// back, nor an older one (a read that found it may be answered late).
func TestGrantsClaim(t *testing.T) {
	var g grants
	if !g.claim("k", "t1", 1, "g1") || g.claim("k", "t2", 1, "g1") {
		t.Fatal("a grant claimed twice, or not at all")
	}
	if g.giveBack("k", 1) {
		t.Fatal("a claimed grant given back")
	}
	if g.row("k", "t1") != "g1" || g.row("k", "t2") != "t2" || g.shown("k", "g1") != "t1" {
		t.Fatal("token translation wrong")
	}
	g.drop("k", "t1")
	if g.claim("k", "t5", 1, "g1") {
		t.Fatal("a released grant claimed again")
	}
	if !g.giveBack("k", 2) || g.claim("k", "t3", 2, "g2") || g.claim("k", "t3", 1, "g1") {
		t.Fatal("a given-back or older grant claimed")
	}
	if !g.claim("k", "t4", 3, "g3") {
		t.Fatal("a later grant not claimed")
	}
}
