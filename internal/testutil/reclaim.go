package testutil

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/poll"
)

// ReclaimNames is how many names a table-mode reclaim test acquires and
// releases: MUTEXFX_RECLAIM_NAMES (for a one-off measurement such as
// 100,000), or 2000.
func ReclaimNames(t testing.TB) int {
	t.Helper()
	s := os.Getenv("MUTEXFX_RECLAIM_NAMES")
	if s == "" {
		return 2000
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 100 {
		t.Fatalf("MUTEXFX_RECLAIM_NAMES=%q: want a number of at least 100", s)
	}
	return n
}

// CheckReclaim acquires and releases ReclaimNames names once each through
// d, a table-mode driver, with a ttl of one second, and fails the test
// unless count (the table's rows) drops to 1 % of them within that ttl.
func CheckReclaim(t *testing.T, d drivers.Driver, count func() int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	const ttl = time.Second
	n := ReclaimNames(t)
	start := time.Now()
	if err := AcquireReleaseEach(ctx, d, n, ttl); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	rows, after := RowsWithin(t, ttl, n/100, count)
	t.Logf("%d names acquired and released in %v; %d rows left %v later", n, took, rows, after)
}

// AcquireReleaseEach acquires and releases, through d with ttl, n distinct
// names once each, with 8 goroutines.
func AcquireReleaseEach(ctx context.Context, d drivers.Driver, n int, ttl time.Duration) error {
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				key, tok := fmt.Sprintf("reclaim:%d", i), rand.Text()
				res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: ttl})
				if err == nil && !res.Acquired {
					err = fmt.Errorf("%s not acquired", key)
				}
				if err == nil {
					_, err = d.Release(ctx, key, tok)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// RowsWithin polls count (the rows of a lock table) until it is at most
// limit, failing the test when that takes longer than d; it returns the
// count then and how long it took.
func RowsWithin(t testing.TB, d time.Duration, limit int, count func() int) (int, time.Duration) {
	t.Helper()
	start := time.Now()
	var n int
	if !poll.Until(d, 20*time.Millisecond, func() bool { n = count(); return n <= limit }) {
		t.Fatalf("%d rows %v later; want at most %d within %v", n, time.Since(start), limit, d)
	}
	return n, time.Since(start)
}

// FencesAfterReclaim acquires a name through d three times a round,
// reclaims its row (sweep; count then must be 0), and fails the test when
// a fence does not increase, over three rounds: a reclaimed name must not
// start its fences again.
func FencesAfterReclaim(ctx context.Context, t *testing.T, d drivers.Driver, sweep func(context.Context) error, count func() int) {
	t.Helper()
	var last uint64
	for range 3 {
		for range 3 {
			tok := rand.Text()
			res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: "again", Token: tok, TTL: time.Minute})
			if err != nil || !res.Acquired || res.Fence <= last {
				t.Fatalf("Acquire = %+v, %v; want a fence above %d", res, err, last)
			}
			last = res.Fence
			if ok, err := d.Release(ctx, "again", tok); err != nil || !ok {
				t.Fatalf("Release = %v, %v", ok, err)
			}
		}
		if err := sweep(ctx); err != nil {
			t.Fatal(err)
		}
		if n := count(); n != 0 {
			t.Fatalf("%d rows after reclaim; want 0", n)
		}
	}
}

// FencesIncrease has 4 goroutines acquire and release two names through d
// 300 times each while sweep (a reclaim of the table's free rows) runs in
// a loop, and fails the test when a name's fence does not increase.
func FencesIncrease(ctx context.Context, t *testing.T, d drivers.Driver, sweep func(context.Context) error) {
	t.Helper()
	stop := make(chan struct{})
	var sweeps sync.WaitGroup
	sweeps.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := sweep(ctx); err != nil {
				t.Error(err)
				return
			}
		}
	})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			key := fmt.Sprintf("fences:%d", w%2)
			var last uint64
			for range 300 {
				tok := rand.Text()
				res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute})
				if err != nil {
					t.Error(err)
					return
				}
				if !res.Acquired {
					continue
				}
				if res.Fence <= last {
					t.Errorf("%s: fence %d after %d", key, res.Fence, last)
				}
				last = res.Fence
				if _, err := d.Release(ctx, key, tok); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	sweeps.Wait()
}
