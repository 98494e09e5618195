package file_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/file"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestCloseDuringAcquireFreesLock: an Acquire that took its lock as Close
// came (the driver refuses the new holder) frees it, as Close frees every
// lock: with flock, its liveness file is closed too, so no descriptor
// stays open and other processes see the holder dead (it leaked, and the
// lock stayed taken for its ttl).
func TestCloseDuringAcquireFreesLock(t *testing.T) {
	dir := t.TempDir()
	for trial := range 100 {
		d, err := file.New(file.Options{Dir: dir, Mechanism: file.MechanismFlock})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var took atomic.Int64
		for g := range 4 {
			wg.Go(func() {
				for i := 0; ; i++ {
					key := fmt.Sprintf("t%d-g%d-%d", trial, g, i)
					if _, err := d.Acquire(context.Background(), drivers.AcquireRequest{Key: key, Token: "a", TTL: time.Hour}); err != nil {
						return // ErrClosed
					}
					took.Add(1)
				}
			})
		}
		testutil.Poll(t, 10*time.Second, "acquisitions under way", func() bool { return took.Load() >= 4 })
		_ = d.Close(context.Background())
		wg.Wait()
		if open := openIn(t, dir); len(open) > 0 {
			t.Fatalf("trial %d: after Close, %d descriptor(s) still open on lock directory files, as %s", trial, len(open), open[0])
		}
	}
}

// openIn lists this process's descriptors open on files of dir.
func openIn(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.HasPrefix(target, dir+"/") {
			out = append(out, target)
		}
	}
	return out
}

// TestReleaseAsFoundHeldReported: a lock this driver found held and
// another driver (process) releases just after the read, before the name
// is marked for the watcher, still gives a Released event (the watcher
// skipped it: the waiter slept its whole retry delay with the lock free).
func TestReleaseAsFoundHeldReported(t *testing.T) {
	dir := t.TempDir()
	holder, waiter := newDriver(t, dir), newDriver(t, dir)
	released := make(chan string, 4096)
	cancel, err := waiter.Subscribe(context.Background(), func(e drivers.Event) {
		if e.Kind == drivers.Released {
			released <- e.Key
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	ctx := context.Background()
	busy := 0
	for i := range 1000 {
		key := fmt.Sprintf("k%d", i)
		if res, err := holder.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "h", TTL: time.Hour}); err != nil || !res.Acquired {
			t.Fatalf("holder: %+v, %v", res, err)
		}
		var wg sync.WaitGroup
		spin := rand.IntN(40000) // the release lands anywhere in the waiter's attempt
		wg.Go(func() {
			for j := range spin {
				_ = j * j
			}
			_, _ = holder.Release(ctx, key, "h")
		})
		res, err := waiter.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "w", TTL: time.Hour})
		wg.Wait()
		if err != nil {
			t.Fatal(err)
		}
		if res.Acquired {
			continue
		}
		busy++ // found held, so released after the read: an event is owed
		for got := ""; got != key; {
			select {
			case got = <-released:
			case <-time.After(time.Second):
				t.Fatalf("attempt %d: %q found held, then released by the other driver: no Released event within 1 s", i, key)
			}
		}
	}
	t.Logf("%d attempts found the lock held", busy)
}
