package redis

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

const epochTTL = 1500 * time.Millisecond

// rawDriver is a driver on addr, closed at the end of the test.
func rawDriver(t *testing.T, opts Options) *Driver {
	t.Helper()
	return standalone(t, opts)
}

// grantedAfter tries to acquire key (testutil.Poll) until it is granted and
// returns when, failing the test after limit. Every refusal must carry a
// positive wait (HolderTTL): the store says how long it holds back.
func grantedAfter(t *testing.T, d *Driver, key string, limit time.Duration) (time.Time, uint64) {
	t.Helper()
	var at time.Time
	var fence uint64
	var last string // the last error logged: a restarting server refuses for a while
	testutil.Poll(t, limit, "a grant of "+key, func() bool {
		res, err := d.Acquire(t.Context(), drivers.AcquireRequest{Key: key, Token: "new", TTL: epochTTL})
		switch {
		case err == nil && res.Acquired:
			at, fence = time.Now(), res.Fence
			return true
		case err == nil && res.HolderTTL <= 0:
			t.Fatalf("refused without a wait: %+v", res)
		case err != nil && err.Error() != last:
			last = err.Error()
			t.Logf("acquire %q: %v", key, err)
		}
		return false
	})
	return at, fence
}

// TestRestartWithoutPersistenceWaits: a server restarted without
// persistence forgot a held lock. The holder's renewal finds it gone; a
// driver that never saw the server before gets no grant until the ttl has
// passed since the restart, and its fence is above the one handed out
// before.
func TestRestartWithoutPersistenceWaits(t *testing.T) {
	s := testutil.StartRedis(t)
	known(t, s)
	holder := rawDriver(t, Options{Addrs: []string{s.Addr}})
	res, err := holder.Acquire(t.Context(), drivers.AcquireRequest{Key: "x", Token: "old", TTL: epochTTL})
	if err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	restarted := time.Now()
	s.Restart()
	other := rawDriver(t, Options{Addrs: []string{s.Addr}})
	at, fence := grantedAfter(t, other, "x", 10*time.Second)
	if waited := at.Sub(restarted); waited < epochTTL {
		t.Fatalf("granted %v after the restart; want no grant within the ttl %v", waited, epochTTL)
	}
	if fence <= res.Fence {
		t.Fatalf("fence after the restart %d <= fence before %d", fence, res.Fence)
	}
	waitFor(t, "the holder's renewal reports the lock lost", func() bool {
		r := holder.Renew(t.Context(), []drivers.Lease{{Key: "x", Token: "old", TTL: epochTTL}})
		return r[0].Err == nil && !r[0].Held
	})
}

// TestFlushWaits: FLUSHALL on a long-running server forgets every lock: no
// grant until the ttl has passed since the flush was found, and fences keep
// growing.
func TestFlushWaits(t *testing.T) {
	s := testutil.StartRedis(t)
	known(t, s)
	d := rawDriver(t, Options{Addrs: []string{s.Addr}})
	res, err := d.Acquire(t.Context(), drivers.AcquireRequest{Key: "x", Token: "old", TTL: epochTTL})
	if err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	flushed := time.Now()
	if _, err := s.Command("FLUSHALL"); err != nil {
		t.Fatal(err)
	}
	at, fence := grantedAfter(t, d, "x", 10*time.Second)
	if waited := at.Sub(flushed); waited < epochTTL {
		t.Fatalf("granted %v after FLUSHALL; want no grant within the ttl %v", waited, epochTTL)
	}
	if fence <= res.Fence {
		t.Fatalf("fence after the flush %d <= fence before %d", fence, res.Fence)
	}
}

// TestBrandNewStore: a server without a marker that started less than the
// ttl ago may be a restarted one: no grant until the ttl has passed since
// it started. One up for longer than the ttl, never flushed and no promoted
// replica, grants at once.
func TestBrandNewStore(t *testing.T) {
	t.Run("young", func(t *testing.T) {
		s := testutil.StartRedis(t)
		d := rawDriver(t, Options{Addrs: []string{s.Addr}})
		res, err := d.Acquire(t.Context(), drivers.AcquireRequest{Key: "x", Token: "a", TTL: 5 * time.Second})
		if err != nil || res.Acquired || res.HolderTTL <= 0 || res.HolderTTL > 5*time.Second {
			t.Fatalf("first Acquire on a server up < ttl = %+v, %v; want refused with a wait in (0, 5s]", res, err)
		}
	})
	t.Run("up longer than the ttl", func(t *testing.T) {
		s := testutil.StartRedis(t)
		// INFO's whole-second uptime may run 1 s ahead: the driver counts
		// uptime - 1 s, so 3 s cover the 1.5 s ttl.
		eventually(t, 10*time.Second, "the server is up 3 s", func() bool {
			info, err := s.Command("INFO", "server")
			_, up, _ := strings.Cut(info, "uptime_in_seconds:")
			n, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(up, "\n", 2)[0]))
			return err == nil && n >= 3
		})
		d := rawDriver(t, Options{Addrs: []string{s.Addr}})
		res, err := d.Acquire(t.Context(), drivers.AcquireRequest{Key: "x", Token: "a", TTL: epochTTL})
		if err != nil || !res.Acquired {
			t.Fatalf("first Acquire on a server up > ttl = %+v, %v; want acquired", res, err)
		}
	})
}

// TestRestartWaitOption: restartWait longer than the ttl holds grants back
// for restartWait.
func TestRestartWaitOption(t *testing.T) {
	s := testutil.StartRedis(t)
	d := rawDriver(t, Options{Addrs: []string{s.Addr}, RestartWait: 8 * time.Second})
	res, err := d.Acquire(t.Context(), drivers.AcquireRequest{Key: "x", Token: "a", TTL: epochTTL})
	if err != nil || res.Acquired || res.HolderTTL <= 5*time.Second || res.HolderTTL > 8*time.Second {
		t.Fatalf("first Acquire = %+v, %v; want refused with a wait in (5s, 8s]", res, err)
	}
}

// TestLongerTTLLengthensTheWait: a driver whose ttl is longer than the wait
// another driver started lengthens it to its own ttl, for every driver.
func TestLongerTTLLengthensTheWait(t *testing.T) {
	s := testutil.StartRedis(t)
	known(t, s)
	short := rawDriver(t, Options{Addrs: []string{s.Addr}})
	long := rawDriver(t, Options{Addrs: []string{s.Addr}})
	if _, err := s.Command("FLUSHALL"); err != nil {
		t.Fatal(err)
	}
	try := func(d *Driver, ttl time.Duration) drivers.AcquireResult {
		t.Helper()
		res, err := d.Acquire(t.Context(), drivers.AcquireRequest{Key: "x", Token: "a", TTL: ttl})
		if err != nil || res.Acquired {
			t.Fatalf("Acquire during the wait = %+v, %v; want refused", res, err)
		}
		return res
	}
	if res := try(short, time.Second); res.HolderTTL > time.Second {
		t.Fatalf("wait started by a 1s driver = %v; want at most 1s", res.HolderTTL)
	}
	if res := try(long, 5*time.Second); res.HolderTTL <= 3*time.Second {
		t.Fatalf("wait seen by a 5s driver = %v; want lengthened to about 5s", res.HolderTTL)
	}
	if res := try(short, time.Second); res.HolderTTL <= 3*time.Second {
		t.Fatalf("wait seen by the 1s driver afterwards = %v; want the lengthened one", res.HolderTTL)
	}
}

// TestRestartWaitNotShortened: after a restart without persistence, a
// driver reconnecting to the new server process starts a forced epoch with
// the wait it knows: none when it was asked for no ttl yet (it only
// inspected), a shorter one when its locks' ttls are. Neither shortens the
// wait another driver's acquire started with the holder's longer ttl (with
// none, the wait was deleted and the forgotten lock granted 30-60 ms after
// the restart).
func TestRestartWaitNotShortened(t *testing.T) {
	const ttl = 4 * time.Second
	for _, tc := range []struct {
		name  string
		known func(t *testing.T, w *Driver) // what the reconnecting driver did before
	}{
		{"no ttl yet", func(t *testing.T, w *Driver) {
			if _, _, err := w.Inspect(t.Context(), "x"); err != nil {
				t.Fatal(err)
			}
		}},
		{"a shorter ttl", func(t *testing.T, w *Driver) {
			if res, err := w.Acquire(t.Context(), drivers.AcquireRequest{Key: "y", Token: "w", TTL: 500 * time.Millisecond}); err != nil || !res.Acquired {
				t.Fatalf("Acquire = %+v, %v", res, err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testutil.StartRedis(t)
			known(t, s)
			holder := rawDriver(t, Options{Addrs: []string{s.Addr}})
			if res, err := holder.Acquire(t.Context(), drivers.AcquireRequest{Key: "x", Token: "old", TTL: ttl}); err != nil || !res.Acquired {
				t.Fatalf("Acquire = %+v, %v", res, err)
			}
			w := rawDriver(t, Options{Addrs: []string{s.Addr}})
			tc.known(t, w)
			restarted := time.Now()
			s.Restart()
			other := rawDriver(t, Options{Addrs: []string{s.Addr}})
			// other's first attempt starts the epoch, waiting the holder's ttl
			if res, err := other.Acquire(t.Context(), drivers.AcquireRequest{Key: "x", Token: "new", TTL: ttl}); err != nil || res.Acquired {
				t.Fatalf("first Acquire after the restart = %+v, %v; want refused", res, err)
			}
			// w's next call reconnects, finds the new run_id: a forced epoch
			testutil.Poll(t, 5*time.Second, "w reconnected", func() bool {
				_, _, err := w.Inspect(t.Context(), "x")
				return err == nil
			})
			tick := time.NewTicker(50 * time.Millisecond) // attempts through the wait
			defer tick.Stop()
			for ; time.Since(restarted) < ttl-500*time.Millisecond; <-tick.C {
				if res, err := other.Acquire(t.Context(), drivers.AcquireRequest{Key: "x", Token: "new", TTL: ttl}); err == nil && res.Acquired {
					t.Fatalf("granted %v after the restart, within the forgotten holder's ttl %v", time.Since(restarted), ttl)
				}
			}
		})
	}
}
