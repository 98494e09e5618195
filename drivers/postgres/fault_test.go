package postgres

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// on opens a driver on dsn, closed when the test ends.
func on(t testing.TB, dsn string, opts Options) Driver {
	t.Helper()
	opts.URL = dsn
	d, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { closeDriver(t, d) })
	return d
}

// mutexOn builds a component on d, closed when the test ends.
func mutexOn(t testing.TB, d drivers.Driver, ttl time.Duration) *component.Mutex {
	t.Helper()
	m, err := component.New(component.Options{Driver: d, Prefix: "fault:", TTL: ttl, RetryDelay: 10 * time.Millisecond})
	if err != nil {
		t.Fatalf("component.New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = m.Close(ctx)
	})
	return m
}

// terminateClients kills every client backend of the server but the caller.
func terminateClients(t testing.TB, dsn string) int {
	t.Helper()
	ctx := ctxT(t)
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("admin connect: %v", err)
	}
	defer c.Close(ctx)
	var n int
	err = c.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'`).Scan(&n)
	if err != nil {
		t.Fatalf("terminate: %v", err)
	}
	return n
}

// lostEvents subscribes to d and collects its Lost events.
type lostEvents struct {
	mu     sync.Mutex
	events []drivers.Event
}

func subscribeLost(t testing.TB, d Driver) *lostEvents {
	t.Helper()
	le := &lostEvents{}
	cancel, err := d.Subscribe(ctxT(t), func(ev drivers.Event) {
		if ev.Kind == drivers.Lost {
			le.mu.Lock()
			le.events = append(le.events, ev)
			le.mu.Unlock()
		}
	})
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	t.Cleanup(cancel)
	return le
}

func (le *lostEvents) has(key, token string) bool {
	le.mu.Lock()
	defer le.mu.Unlock()
	for _, ev := range le.events {
		if ev.Key == key && ev.Token == token {
			return true
		}
	}
	return false
}

// within polls cond until it holds, failing the test after d
// (testutil.Poll), and returns how long it took.
func within(t testing.TB, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	testutil.Poll(t, d, what, cond)
	return time.Since(start)
}

// renewedAfter waits, up to d, for the store to show the lock key, of ttl,
// renewed after since: an expiry later than since + ttl (read with
// Inspect, polling: the store sends no signal).
func renewedAfter(ctx context.Context, t testing.TB, drv Driver, key string, ttl time.Duration, since time.Time, d time.Duration, what string) {
	t.Helper()
	within(t, d, what, func() bool {
		info, held, err := drv.Inspect(ctx, key)
		if err == nil && !held {
			t.Fatalf("%s: lock %s not held", what, key)
		}
		return err == nil && time.Now().Add(info.TTL).After(since.Add(ttl))
	})
}

// lostWithin waits for l to end, up to d, and returns how long it took.
func lostWithin(t testing.TB, d time.Duration, what string, l *component.Lock) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case <-l.Done():
		return time.Since(start)
	case <-time.After(d):
		t.Fatalf("%s: not within %v", what, d)
		return 0
	}
}

// TestTerminateBackend kills the server side of every connection while a
// lock is held: advisory locks are lost within a second (pushed, well before
// the ttl/3 probe), table locks are kept and renewed.
func TestTerminateBackend(t *testing.T) {
	srv := testutil.StartPostgres(t)
	for _, mode := range []string{ModeAdvisory, ModeTable} {
		t.Run(mode, func(t *testing.T) {
			ctx := ctxT(t)
			d := on(t, srv.DSN, Options{Mode: mode})
			lost := subscribeLost(t, d)
			const ttl = 6 * time.Second // probes every 2 s: a loss within 1 s was pushed
			m := mutexOn(t, d, ttl)
			l, err := m.Acquire(ctx, "terminated")
			if err != nil {
				t.Fatal(err)
			}
			if n := terminateClients(t, srv.DSN); n == 0 {
				t.Fatal("no backend terminated")
			}
			if mode == ModeAdvisory {
				took := lostWithin(t, time.Second, "lock lost", l)
				within(t, time.Second, "Lost event", func() bool { return lost.has(l.Key(), l.Token()) })
				t.Logf("advisory lock lost %v after pg_terminate_backend", took)
				if ok, err := d.Extend(ctx, l.Key(), l.Token(), ttl); err != nil || ok {
					t.Fatalf("Extend after loss = %v, %v; want false", ok, err)
				}
				// the server frees it as the terminated backend exits, just
				// after the FATAL message that told the holder: another
				// driver then takes it
				other := on(t, srv.DSN, Options{Mode: mode})
				testutil.Poll(t, time.Second, "another driver to take the lock", func() bool {
					res, err := other.Acquire(ctx, drivers.AcquireRequest{Key: l.Key(), Token: "other", TTL: ttl})
					if err != nil {
						t.Fatalf("Acquire after loss: %v", err)
					}
					return res.Acquired
				})
				return
			}
			if ok, err := l.Extend(ctx, ttl); err != nil || !ok {
				t.Fatalf("Extend after terminate = %v, %v; want kept", ok, err)
			}
			terminated := time.Now()
			terminateClients(t, srv.DSN)
			renewedAfter(ctx, t, d, l.Key(), ttl, terminated.Add(ttl/3), 2*ttl, "two renewals (every ttl/3) on new connections")
			if !l.Held() {
				t.Fatalf("table lock lost after terminate: %v", l.Err())
			}
			if ok, err := l.Release(ctx); err != nil || !ok {
				t.Fatalf("Release = %v, %v", ok, err)
			}
		})
	}
}

// TestServerStop stops and restarts the server while locks are held.
func TestServerStop(t *testing.T) {
	cases := []struct {
		name     string
		mode     string
		ttl      time.Duration
		down     time.Duration
		wantLost bool
	}{
		{"advisory", ModeAdvisory, 6 * time.Second, 300 * time.Millisecond, true},
		{"table-short", ModeTable, 3 * time.Second, 500 * time.Millisecond, false},
		{"table-long", ModeTable, time.Second, 0, true}, // down until lost
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := testutil.StartPostgres(t)
			ctx := ctxT(t)
			d := on(t, srv.DSN, Options{Mode: tc.mode})
			m := mutexOn(t, d, tc.ttl)
			var locks []*component.Lock
			for _, n := range []string{"a", "b", "c"} {
				l, err := m.Acquire(ctx, n)
				if err != nil {
					t.Fatal(err)
				}
				locks = append(locks, l)
			}
			stopped := time.Now()
			srv.Stop()
			switch {
			case tc.mode == ModeAdvisory:
				for _, l := range locks {
					lostWithin(t, time.Second, "advisory lock lost", l)
				}
				t.Logf("advisory locks lost %v after the stop", time.Since(stopped))
				srv.Start()
			case tc.wantLost:
				took := lostWithin(t, 2*tc.ttl, "table lock lost", locks[0])
				if took > tc.ttl {
					t.Fatalf("lost %v after the stop; want within ttl %v", took, tc.ttl)
				}
				t.Logf("table lock lost %v after the stop (ttl %v)", took, tc.ttl)
				srv.Start()
			default:
				time.Sleep(tc.down) // the outage
				srv.Start()
				restarted := time.Now()
				for _, l := range locks {
					renewedAfter(ctx, t, d, l.Key(), tc.ttl, restarted, 2*tc.ttl, "a renewal after the outage")
				}
				for _, l := range locks {
					if !l.Held() {
						t.Fatalf("lock lost after a %v outage shorter than ttl: %v", tc.down, l.Err())
					}
				}
				if ok, err := locks[0].Extend(ctx, tc.ttl); err != nil || !ok {
					t.Fatalf("Extend after the outage = %v, %v", ok, err)
				}
				return
			}
			// lost locks are free for another component once the server is back
			other := mutexOn(t, on(t, srv.DSN, Options{Mode: tc.mode}), tc.ttl)
			l, err := other.Acquire(ctx, "a", component.WithTimeout(5*time.Second))
			if err != nil {
				t.Fatalf("Acquire after restart: %v", err)
			}
			if l.Fence() <= locks[0].Fence() {
				t.Fatalf("fence %d after restart; want > %d", l.Fence(), locks[0].Fence())
			}
		})
	}
}

// TestProxyStall stalls the link to the server: calls end with their ctx;
// an advisory session silent past StallTimeout is given up (locks lost, as
// the server frees them once the link heals); table locks survive a stall
// shorter than the ttl.
func TestProxyStall(t *testing.T) {
	srv := testutil.StartPostgres(t)
	for _, mode := range []string{ModeAdvisory, ModeTable} {
		t.Run(mode, func(t *testing.T) {
			ctx := ctxT(t)
			p := testutil.NewProxy(t, fmt.Sprintf("127.0.0.1:%d", srv.Port))
			d, err := New(Options{Host: "127.0.0.1", Port: p.Port(), Username: "postgres", Database: "postgres",
				SSLMode: "disable", Mode: mode, StallTimeout: 500 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { closeDriver(t, d) })
			lost := subscribeLost(t, d)
			key, tok := "stall:"+rand.Text(), rand.Text()
			if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: 5 * time.Second}); err != nil || !res.Acquired {
				t.Fatalf("Acquire = %+v, %v", res, err)
			}
			p.Stall()
			cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			start := time.Now()
			ok, err := d.Extend(cctx, key, tok, 5*time.Second)
			cancel()
			if err == nil && ok {
				t.Fatal("Extend through a stalled link = true; want an error or false (session given up)")
			}
			t.Logf("Extend through a stalled link = %v, %v after %v", ok, err, time.Since(start))
			if e := time.Since(start); e > 2*time.Second {
				t.Fatalf("Extend returned after %v; want soon after its ctx ended", e)
			}
			if mode == ModeAdvisory {
				within(t, 2*time.Second, "Lost event after the stall", func() bool { return lost.has(key, tok) })
			}
			p.Resume()
			other := on(t, srv.DSN, Options{Mode: mode})
			if mode == ModeAdvisory {
				// the given-up connection closes through the healed link and
				// the server frees the lock
				within(t, 3*time.Second, "lock freed", func() bool {
					res, err := other.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "other", TTL: time.Second})
					return err == nil && res.Acquired
				})
				return
			}
			if ok, err := d.Extend(ctx, key, tok, 5*time.Second); err != nil || !ok {
				t.Fatalf("Extend after the stall = %v, %v; want kept", ok, err)
			}
			if res, err := other.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "other", TTL: time.Second}); err != nil || res.Acquired {
				t.Fatalf("other Acquire = %+v, %v; want held", res, err)
			}
		})
	}
}
