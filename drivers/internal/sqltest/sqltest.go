// Package sqltest holds the tests the SQL drivers (mysql, postgres) share:
// each driver's test files give the store-specific parts (how to end a
// holder's session, how another session waits for a lock, how to count a
// table's rows), and the checks are written once here.
package sqltest

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// Waiter is another session of the store, made to wait in the server for
// a lock held through the driver.
type Waiter struct {
	// Block takes the lock, waiting in the server until it is granted.
	Block func(ctx context.Context) error
	// Waiting reports whether Block waits in the server now.
	Waiting func() bool
	// Done lets the lock go and ends the session.
	Done func()
}

// HangupCase is a fault that ends the session holding a lock.
type HangupCase struct {
	Name string
	// Mutex opens the holder's Mutex (through a proxy, for a reset link),
	// with a ttl of a minute and no probes or renewals in between.
	Mutex func(t testing.TB) *component.Mutex
	// Fault ends the session holding l, and returns once it is done.
	Fault func(ctx context.Context, t testing.TB, l *component.Lock)
}

// Hangup is a store's side of the hang-up tests: a holder is told it lost
// its lock as soon as the server ends the holder's session.
type Hangup struct {
	Cases []HangupCase
	// Waiter opens another session, to wait for l in the server.
	Waiter func(ctx context.Context, t testing.TB, l *component.Lock) Waiter
}

// gap holds a lock through m, with another session blocked in the server
// for it, runs fault, and returns how long after that session got the lock
// the holder's lock context ended (negative: before).
func (h Hangup) gap(ctx context.Context, t testing.TB, m *component.Mutex, name string, c HangupCase) time.Duration {
	t.Helper()
	l, err := m.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	w := h.Waiter(ctx, t, l)
	defer w.Done()
	granted := make(chan time.Time, 1)
	go func() {
		err := w.Block(ctx)
		at := time.Now()
		if err != nil {
			t.Errorf("the other session's wait for the lock: %v", err)
		}
		granted <- at
	}()
	testutil.Poll(t, 10*time.Second, "the other session to wait for the lock", w.Waiting)
	c.Fault(ctx, t, l)
	gap := testutil.Overlap(ctx, t, l.Done(), granted)
	if !errors.Is(l.Err(), component.ErrLost) {
		t.Fatalf("lock ended with %v; want ErrLost", l.Err())
	}
	_, _ = l.Release(ctx)
	return gap
}

// Test checks, for each case, that a holder whose session ended is told
// lost within a second of the server giving the lock to another session,
// with no probe or renewal in between (nothing else could tell it).
func (h Hangup) Test(t *testing.T) {
	for _, c := range h.Cases {
		t.Run(c.Name, func(t *testing.T) {
			ctx := Context(t, time.Minute)
			m := c.Mutex(t)
			for i := range 3 {
				if gap := h.gap(ctx, t, m, "hangup-"+strconv.Itoa(i), c); gap > time.Second {
					t.Fatalf("told lost %v after the server freed the lock", gap)
				}
			}
		})
	}
}

// Bench reports, for each case, how long after the server freed a lock
// (another session got it) its holder was told: percentiles over b.N
// faults.
func (h Hangup) Bench(b *testing.B) {
	for _, c := range h.Cases {
		b.Run(c.Name, func(b *testing.B) {
			ctx := Context(b, 10*time.Minute)
			m := c.Mutex(b)
			gaps := make([]time.Duration, 0, b.N)
			for i := 0; b.Loop(); i++ {
				gaps = append(gaps, h.gap(ctx, b, m, "gap-"+strconv.Itoa(i), c))
			}
			testutil.ReportOverlaps(b, gaps)
		})
	}
}

// Context is a context ending after d or with the test.
func Context(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// ReclaimTable is a table-mode driver on a table of its own.
type ReclaimTable struct {
	Driver drivers.Driver
	// Rows counts the table's rows into n.
	Rows func(n *int) error
	// Sweep runs one reclaim round.
	Sweep func(ctx context.Context) (int64, error)
	// Waiters are at least 4 other drivers on the table, and Liveness how
	// long a waiter's queue entry lives after its last attempt.
	Waiters  []drivers.Driver
	Liveness time.Duration
}

// Reclaim checks the reclaimer on tables open makes (on table, a name of
// its own, to drop when the test ends), one per subtest: names acquired
// and released once each leave at most 1 % of their rows one ttl after
// the last release (Rows); a name acquired again after its row was
// reclaimed gets a higher fence, also while acquisitions race with
// reclaims (Fences); a free row stays while a live waiter queues for it,
// and goes once its waiters are dead (Queued: reclaimQueued).
func Reclaim(t *testing.T, open func(t *testing.T, table string) ReclaimTable) {
	run := func(t *testing.T) (ReclaimTable, func() int, func(context.Context) error) {
		rt := open(t, "mutexfx_reclaim_"+strings.ToLower(rand.Text()[:8]))
		count := func() int {
			var n int
			if err := rt.Rows(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		sweep := func(ctx context.Context) error { _, err := rt.Sweep(ctx); return err }
		return rt, count, sweep
	}
	t.Run("Rows", func(t *testing.T) {
		rt, count, _ := run(t)
		testutil.CheckReclaim(t, rt.Driver, count)
	})
	t.Run("Fences", func(t *testing.T) {
		rt, count, sweep := run(t)
		ctx := Context(t, time.Minute)
		testutil.FencesAfterReclaim(ctx, t, rt.Driver, sweep, count)
		testutil.FencesIncrease(ctx, t, rt.Driver, sweep)
	})
	t.Run("Queued", func(t *testing.T) {
		rt, count, sweep := run(t)
		reclaimQueued(t, rt, count, sweep)
	})
}

// TableDropped checks that a table-mode driver whose lock table an
// operator dropped (drop) while it ran creates it again: a release then
// finds nothing held, and the key can be taken and released again.
func TableDropped(t *testing.T, d drivers.Driver, drop func(ctx context.Context) error) {
	ctx := Context(t, time.Minute)
	key := "dropped:" + rand.Text()
	take := func(token string) {
		t.Helper()
		if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: token, TTL: time.Minute}); err != nil || !res.Acquired {
			t.Fatalf("Acquire = %+v, %v", res, err)
		}
	}
	take("a")
	if err := drop(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := d.Release(ctx, key, "a"); err != nil || ok {
		t.Fatalf("Release after the drop = %v, %v; want false, nil", ok, err)
	}
	take("b")
	if ok, err := d.Release(ctx, key, "b"); err != nil || !ok {
		t.Fatalf("Release = %v, %v; want true, nil", ok, err)
	}
}

// HolderOfOtherMutex checks that Inspect through b of a lock held
// through a (another driver, another session) tells the holder's
// application, host and pid.
func HolderOfOtherMutex(t *testing.T, a, b *component.Mutex) {
	t.Helper()
	ctx := Context(t, time.Minute)
	name := "holder:" + rand.Text()
	l, err := a.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	st, held, err := b.Inspect(ctx, name)
	host, _ := os.Hostname()
	want, _ := component.ParseHolder(l.Token())
	if err != nil || !held || !st.HolderKnown || st.Holder.Host != host || st.Holder.PID != os.Getpid() ||
		st.Holder.Application != want.Application || want.Application == "" {
		t.Fatalf("Inspect = %+v, %v, %v; want held by this process (%s, %d)", st, held, err, host, os.Getpid())
	}
}
