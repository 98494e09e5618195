package mysql

import (
	"bytes"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/sqlkit"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// queueOf returns the driver ids queued for key, in order.
func queueOf(t *testing.T, d Driver, key string) [][]byte {
	t.Helper()
	var q []byte
	if err := coreOf(d).db.QueryRowContext(ctxT(t), "SELECT queue FROM "+tab(d).s.table+" WHERE name_hash = ?", sqlkit.KeyHash(key)).Scan(&q); err != nil {
		t.Fatal(err)
	}
	var ids [][]byte
	for ; len(q) >= entryWidth; q = q[entryWidth:] {
		ids = append(ids, q[:16])
	}
	return ids
}

// TestTableQueueOrder: in table mode, drivers whose attempts failed take a
// released lock in the order they first failed, whoever asks first; a
// releaser asking again goes to the end.
func TestTableQueueOrder(t *testing.T) {
	ctx := ctxT(t)
	opts := Options{DSN: testutil.MySQLDSN(), Mode: ModeTable, Table: "mutexfx_test_locks", WaiterLiveness: 10 * time.Second}
	ds := map[string]Driver{}
	for _, n := range []string{"a", "b", "c", "d"} {
		ds[n] = openDriver(t, opts)
	}
	key := "mysqltest:" + runID + ":" + t.Name()
	tokens := map[string]string{}
	acquire := func(who string, want bool) {
		t.Helper()
		tok := token()
		res, err := ds[who].Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: 10 * time.Second})
		if err != nil || res.Acquired != want {
			t.Fatalf("%s acquire = %+v, %v; want acquired %v (queue %x)", who, res, err, want, queueOf(t, ds["a"], key))
		}
		if want {
			tokens[who] = tok
		}
	}
	release := func(who string) {
		t.Helper()
		if ok, err := ds[who].Release(ctx, key, tokens[who]); err != nil || !ok {
			t.Fatalf("%s release = %v, %v", who, ok, err)
		}
	}
	queued := func(whos ...string) {
		t.Helper()
		q := queueOf(t, ds["a"], key)
		if len(q) != len(whos) {
			t.Fatalf("queue has %d entries, want %v", len(q), whos)
		}
		for i, who := range whos {
			if !bytes.Equal(q[i], tab(ds[who]).id) {
				t.Fatalf("queue entry %d is not %s's (want %v)", i, who, whos)
			}
		}
	}
	acquire("a", true)
	acquire("b", false)
	acquire("c", false)
	acquire("d", false)
	acquire("c", false) // asking again keeps the place
	queued("b", "c", "d")
	release("a")
	acquire("a", false)
	acquire("d", false)
	acquire("c", false)
	queued("b", "c", "d", "a")
	acquire("b", true)
	queued("c", "d", "a")
	release("b")
	acquire("b", false)
	acquire("d", false)
	acquire("c", true)
	release("c")
	acquire("a", false)
	acquire("d", true)
	release("d")
	acquire("a", true)
	release("a")
	acquire("b", true)
	queued()
	release("b")
}

// TestTableQueuePrune: dead entries (drivers that stopped asking) at the
// head of a queue are pruned by the next attempts, pruneDepth at a time,
// and delay nobody once pruned.
func TestTableQueuePrune(t *testing.T) {
	ctx := ctxT(t)
	opts := Options{DSN: testutil.MySQLDSN(), Mode: ModeTable, Table: "mutexfx_test_locks"}
	a, b := openDriver(t, opts), openDriver(t, opts)
	key := "mysqltest:" + runID + ":" + t.Name()
	tok := token()
	if res, err := a.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: 10 * time.Second}); err != nil || !res.Acquired {
		t.Fatalf("a acquire = %+v, %v", res, err)
	}
	// five drivers that asked long ago (stamp: 1 ms after 2000-01-01)
	var dead []byte
	for i := range 5 {
		dead = append(dead, bytes.Repeat([]byte{byte('A' + i)}, 16)...)
		dead = append(dead, "0000000000001"...)
	}
	if _, err := tab(a).db.ExecContext(ctx, "UPDATE "+tab(a).s.table+" SET queue = ? WHERE name_hash = ?", dead, sqlkit.KeyHash(key)); err != nil {
		t.Fatal(err)
	}
	if ok, err := a.Release(ctx, key, tok); err != nil || !ok {
		t.Fatalf("a release = %v, %v", ok, err)
	}
	var took int
	for attempt := 1; attempt <= 3 && took == 0; attempt++ {
		res, err := b.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: token(), TTL: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if res.Acquired {
			took = attempt
		}
	}
	if took != 2 { // the first attempt prunes three and queues b, the second prunes two and takes
		t.Fatalf("b took the lock at attempt %d, want 2", took)
	}
	if q := queueOf(t, a, key); len(q) != 0 {
		t.Fatalf("queue left with %d entries", len(q))
	}
}

// TestTableQueueOwnDriver: a driver whose own lock is held, with nobody
// queued, does not queue for it (its process's waiters queue in the
// component); it does once another driver queued.
func TestTableQueueOwnDriver(t *testing.T) {
	ctx := ctxT(t)
	// Entries live a minute: on a loaded machine the default 100 ms can
	// pass between two attempts, and a lapsed entry leaves the queue.
	opts := Options{DSN: testutil.MySQLDSN(), Mode: ModeTable, Table: "mutexfx_test_locks", WaiterLiveness: time.Minute}
	a, b := openDriver(t, opts), openDriver(t, opts)
	key := "mysqltest:" + runID + ":" + t.Name()
	try := func(d Driver, want bool) {
		t.Helper()
		res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: token(), TTL: 10 * time.Second})
		if err != nil || res.Acquired != want {
			t.Fatalf("acquire = %+v, %v; want %v", res, err, want)
		}
	}
	try(a, true)
	try(a, false)
	if q := queueOf(t, a, key); len(q) != 0 {
		t.Fatalf("own driver queued: %d entries", len(q))
	}
	try(b, false)
	try(a, false)
	if q := queueOf(t, a, key); len(q) != 2 || !bytes.Equal(q[0], tab(b).id) || !bytes.Equal(q[1], tab(a).id) {
		t.Fatalf("queue %x, want b then a", q)
	}
}

// TestPollEvery: a queued driver polls faster the nearer it is to the head.
func TestPollEvery(t *testing.T) {
	s, err := Options{Mode: ModeTable}.validate()
	if err != nil {
		t.Fatal(err)
	}
	for pos, want := range []time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 6 * time.Millisecond, 8 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond} {
		if got := s.pollEvery(pos); got != want {
			t.Errorf("pollEvery(%d) = %v, want %v", pos, got, want)
		}
	}
}

// TestWatchJudge: what the table-mode watcher does with a polled key: the
// queue's new head is prompted once and then polls by its own attempts
// (retry hint), a free key it may take prompts it and is polled fast, a
// key held by its own driver with nobody queued prompts nothing.
func TestWatchJudge(t *testing.T) {
	d := openDriver(t, Options{DSN: testutil.MySQLDSN(), Mode: ModeTable})
	s := tab(d).s
	for _, c := range []struct {
		name   string
		st     keyState
		prompt bool
		every  time.Duration
		retry  time.Duration // hint of the next failed attempt
	}{
		{"third in the queue", keyState{pos: 2, n: 4}, false, s.pollEvery(2), 0},
		{"new head of the queue", keyState{pos: 0, n: 4}, true, s.poll, time.Microsecond},
		{"free, head", keyState{free: true, pos: 0, n: 1}, true, s.fastPoll(), time.Microsecond},
		{"free, behind two dead entries", keyState{free: true, pos: 2, n: 3, lead: 2}, true, s.fastPoll(), 0},
		{"held by this driver, nobody queued", keyState{mineHeld: true, pos: -1}, false, s.poll, 0},
		{"held by another, not queued", keyState{pos: -1, n: 2}, true, s.poll, 0},
	} {
		key := "judge:" + c.name
		if r := tab(d).watch.failed(key, true, time.Now()); r != 0 {
			t.Fatalf("%s: first failure's hint %v", c.name, r)
		}
		prompt, every := tab(d).watch.judge(key, c.st)
		if prompt != c.prompt || every != c.every {
			t.Errorf("%s: judge = %v, %v; want %v, %v", c.name, prompt, every, c.prompt, c.every)
		}
		if r := tab(d).watch.failed(key, false, time.Now()); r != c.retry {
			t.Errorf("%s: hint %v, want %v", c.name, r, c.retry)
		}
	}
}
