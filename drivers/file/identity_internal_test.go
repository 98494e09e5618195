//go:build linux

package file

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mutexfx/mutexfx/drivers"
)

// lossCases lose a held lock's file: deleted, replaced, or moved away or
// removed with its directory (an operator, a tmp cleaner).
var lossCases = []struct {
	name string
	lose func(t *testing.T, dir, path string)
}{
	{"deleted", func(t *testing.T, _, path string) {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}},
	{"replaced", func(t *testing.T, dir, path string) {
		other := filepath.Join(dir, "other")
		if err := os.WriteFile(other, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(other, path); err != nil {
			t.Fatal(err)
		}
	}},
	{"directory moved", func(t *testing.T, dir, _ string) {
		if err := os.Rename(dir, dir+".old"); err != nil {
			t.Fatal(err)
		}
	}},
	{"directory removed", func(t *testing.T, dir, _ string) {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
	}},
}

// TestLockFileLost: a held lock's file deleted, replaced or moved away with
// its directory (an operator, a tmp cleaner) holds nothing any more: the
// next Acquire takes the new file at the path. The old holder must then be
// told at its next Extend or Renew (before: they kept answering held, so
// its lock was never lost), and the new holder's fence must be above the
// old one's, so that a store refuses the old holder's writes (before: the
// new file restarted the fences at 1).
func TestLockFileLost(t *testing.T) {
	for _, tc := range lossCases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := filepath.Join(t.TempDir(), "locks")
			a, b := internalDriver(t, dir), internalDriver(t, dir)
			first, err := a.Acquire(ctx, drivers.AcquireRequest{Key: "k", Token: "a", TTL: time.Minute})
			if err != nil || !first.Acquired {
				t.Fatalf("Acquire = %+v, %v", first, err)
			}
			tc.lose(t, dir, filepath.Join(dir, fileName("k")))

			for _, d := range []*Driver{b, a} { // another driver, and the holder's own
				res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: "k", Token: "new", TTL: time.Minute})
				if err != nil || !res.Acquired {
					t.Fatalf("Acquire after the file was lost = %+v, %v; want it", res, err)
				}
				if res.Fence <= first.Fence {
					t.Fatalf("fence %d after the file was lost; want above the lost holder's %d", res.Fence, first.Fence)
				}
				if ok, err := d.Release(ctx, "k", "new"); err != nil || !ok {
					t.Fatalf("Release = %v, %v", ok, err)
				}
			}
			if r := a.Renew(ctx, []drivers.Lease{{Key: "k", Token: "a", TTL: time.Minute}})[0]; r.Held || r.Err != nil {
				t.Fatalf("Renew of the lost holder = %+v; want not held", r)
			}
			if ok, err := a.Extend(ctx, "k", "a", time.Minute); ok || err != nil {
				t.Fatalf("Extend of the lost holder = %v, %v; want not held", ok, err)
			}
			// with MechanismFlock, the lost holder's liveness file went too
			if ents, err := os.ReadDir(dir); err != nil || len(ents) != 1 || ents[0].Name() != fileName("k") {
				t.Fatalf("the directory holds %v, %v; want only the lock file", ents, err)
			}
		})
	}
}

// TestReleaseOfLostLock: the Release of a holder whose file was lost
// (lossCases) while another holds the lock at the path reports false, as for
// any lock taken over, and leaves the new holder's lock alone. Before, it
// cleared the record of the lost file and reported true: a caller checking
// Release's result believed its lock held to the end while another holder
// ran beside it.
func TestReleaseOfLostLock(t *testing.T) {
	for _, tc := range lossCases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := filepath.Join(t.TempDir(), "locks")
			a, b := internalDriver(t, dir), internalDriver(t, dir)
			if res, err := a.Acquire(ctx, drivers.AcquireRequest{Key: "k", Token: "a", TTL: time.Minute}); err != nil || !res.Acquired {
				t.Fatalf("Acquire = %+v, %v", res, err)
			}
			tc.lose(t, dir, filepath.Join(dir, fileName("k")))
			res, err := b.Acquire(ctx, drivers.AcquireRequest{Key: "k", Token: "b", TTL: time.Minute})
			if err != nil || !res.Acquired {
				t.Fatalf("Acquire after the file was lost = %+v, %v; want it", res, err)
			}
			if ok, err := a.Release(ctx, "k", "a"); ok || err != nil {
				t.Fatalf("Release of the lost holder = %v, %v; want false (b holds the lock)", ok, err)
			}
			if info, held, err := b.Inspect(ctx, "k"); err != nil || !held || info.Token != "b" || info.Fence != res.Fence {
				t.Fatalf("Inspect after the lost holder's Release = %+v, %v, %v; want b's lock", info, held, err)
			}
			if ok, err := b.Release(ctx, "k", "b"); err != nil || !ok {
				t.Fatalf("Release of the new holder = %v, %v", ok, err)
			}
			// nothing left behind but the lock file (with MechanismFlock,
			// the lost holder's liveness file is deleted too)
			if ents, err := os.ReadDir(dir); err != nil || len(ents) != 1 || ents[0].Name() != fileName("k") {
				t.Fatalf("the directory holds %v, %v; want only the lock file", ents, err)
			}
		})
	}
}

// TestFifoAtLockPath: something other than a regular file at a lock path
// (here a FIFO, which blocks a plain open for reading until a writer comes)
// fails the calls; none hangs.
func TestFifoAtLockPath(t *testing.T) {
	dir := t.TempDir()
	d := internalDriver(t, dir)
	if err := unix.Mkfifo(filepath.Join(dir, fileName("k")), 0o600); err != nil {
		t.Fatal(err)
	}
	d.markBusy(fileName("k"), "k") // Acquire then peeks first, read-only
	done := make(chan error, 2)
	go func() {
		_, err := d.Acquire(context.Background(), drivers.AcquireRequest{Key: "k", Token: "a", TTL: time.Minute})
		done <- err
	}()
	go func() {
		_, _, err := d.Inspect(context.Background(), "k")
		done <- err
	}()
	for range 2 {
		select {
		case err := <-done:
			if err == nil {
				t.Fatal("a call on a FIFO succeeded; want an error")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a call on a FIFO hangs")
		}
	}
}

// TestSymlinkAtLockPath: a symbolic link at a lock path is refused, not
// followed: the calls fail and the file it points to, outside the
// directory, is neither locked nor written.
func TestSymlinkAtLockPath(t *testing.T) {
	ctx := context.Background()
	dir, outside := t.TempDir(), filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(outside, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, fileName("k"))); err != nil {
		t.Fatal(err)
	}
	d := internalDriver(t, dir)
	if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: "k", Token: "a", TTL: time.Minute}); err == nil {
		t.Fatalf("Acquire through a symlink = %+v; want an error", res)
	}
	if _, _, err := d.Inspect(ctx, "k"); err == nil {
		t.Fatal("Inspect through a symlink succeeded; want an error")
	}
	if ok, err := d.Extend(ctx, "k", "a", time.Minute); ok || err == nil {
		t.Fatalf("Extend through a symlink = %v, %v; want an error", ok, err)
	}
	if got, err := os.ReadFile(outside); err != nil || string(got) != "keep" {
		t.Fatalf("the symlink's target holds %q, %v; want it untouched", got, err)
	}
}

// internalDriver is a driver on dir, closed when the test ends.
func internalDriver(t *testing.T, dir string) *Driver {
	t.Helper()
	d, err := New(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close(context.Background()) })
	return d
}

// TestWatchAfterDirectoryRemoved: the directory watcher of a driver whose
// directory was removed or moved away is replaced at the next contention,
// so that releases in the directory at the path still wake its waiters;
// and the removal itself wakes them (their locks went with it). Before,
// the watcher kept its dropped watch and no release was heard again.
func TestWatchAfterDirectoryRemoved(t *testing.T) {
	for _, tc := range []struct {
		name string
		lose func(dir string) error
	}{
		{"removed", os.RemoveAll},
		{"moved", func(dir string) error { return os.Rename(dir, dir+".old") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := filepath.Join(t.TempDir(), "locks")
			a, b := internalDriver(t, dir), internalDriver(t, dir) // b stands for another process
			events := make(chan drivers.Event, 16)
			unsubscribe, err := a.Subscribe(ctx, func(e drivers.Event) { events <- e })
			if err != nil {
				t.Fatal(err)
			}
			defer unsubscribe()
			heard := func(what string) {
				t.Helper()
				select {
				case e := <-events:
					if e.Kind != drivers.Released || e.Key != "k" {
						t.Fatalf("%s: event %+v", what, e)
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("%s: no release heard", what)
				}
			}
			contend := func() { // b holds k, a finds it held (which starts a's watcher)
				t.Helper()
				if res, err := b.Acquire(ctx, drivers.AcquireRequest{Key: "k", Token: "b", TTL: time.Minute}); err != nil || !res.Acquired {
					t.Fatalf("b: %+v, %v", res, err)
				}
				if res, err := a.Acquire(ctx, drivers.AcquireRequest{Key: "k", Token: "a", TTL: time.Minute}); err != nil || res.Acquired {
					t.Fatalf("a: %+v, %v; want taken", res, err)
				}
			}
			contend()
			if ok, err := b.Release(ctx, "k", "b"); err != nil || !ok {
				t.Fatalf("Release = %v, %v", ok, err)
			}
			heard("release")

			if err := tc.lose(dir); err != nil {
				t.Fatal(err)
			}
			heard("directory " + tc.name)
			a.mu.Lock()
			dead := a.watch != nil && a.watch.dead
			a.mu.Unlock()
			if !dead {
				t.Fatal("the watcher of the lost directory is not marked dead")
			}
			// b's lock on k went with the directory (its holder's file is
			// gone): b takes k again in the directory created anew
			contend()
			if ok, err := b.Release(ctx, "k", "b"); err != nil || !ok {
				t.Fatalf("Release = %v, %v", ok, err)
			}
			heard("release in the directory created anew")
		})
	}
}

// TestRelativeDirAfterChdir: a relative Dir is taken from the working
// directory when New is called: a process that changes it later keeps its
// locks (before, the renewals looked the files up from the new one and
// lost them all).
func TestRelativeDirAfterChdir(t *testing.T) {
	ctx := context.Background()
	t.Chdir(t.TempDir())
	d := internalDriver(t, "locks")
	if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: "k", Token: "a", TTL: time.Minute}); err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	t.Chdir(t.TempDir())
	if r := d.Renew(ctx, []drivers.Lease{{Key: "k", Token: "a", TTL: time.Minute}})[0]; !r.Held || r.Err != nil {
		t.Fatalf("Renew after a chdir = %+v; want held", r)
	}
}

// TestSubscriberAcquiresAsDirectoryGoes: a subscriber told that the
// directory went may call Acquire at once; when it finds the lock held
// (taken again in the directory created anew), that Acquire starts a new
// watcher without waiting for the old one, whose goroutine is the one
// calling the subscriber (before, it waited for it: a deadlock).
func TestSubscriberAcquiresAsDirectoryGoes(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "locks")
	a, b := internalDriver(t, dir), internalDriver(t, dir)
	var armed atomic.Bool
	got, seen := make(chan error, 1), make(chan struct{}, 16)
	unsubscribe, err := a.Subscribe(ctx, func(e drivers.Event) {
		if !armed.CompareAndSwap(true, false) {
			seen <- struct{}{}
			return
		}
		if res, err := b.Acquire(ctx, drivers.AcquireRequest{Key: "k", Token: "b2", TTL: time.Minute}); err != nil || !res.Acquired {
			got <- fmt.Errorf("b, in the new directory: %+v, %v", res, err)
			return
		}
		res, err := a.Acquire(ctx, drivers.AcquireRequest{Key: "k", Token: "a", TTL: time.Minute})
		if err == nil && res.Acquired {
			err = errors.New("a acquired a lock b holds")
		}
		got <- err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer unsubscribe()
	if res, err := b.Acquire(ctx, drivers.AcquireRequest{Key: "k", Token: "b", TTL: time.Minute}); err != nil || !res.Acquired {
		t.Fatalf("b: %+v, %v", res, err)
	}
	if res, err := a.Acquire(ctx, drivers.AcquireRequest{Key: "k", Token: "a", TTL: time.Minute}); err != nil || res.Acquired {
		t.Fatalf("a: %+v, %v; want taken", res, err) // starts a's watcher
	}
	// b releases before the directory goes (a file held open there would
	// keep its removal from being reported until it is closed)
	if ok, err := b.Release(ctx, "k", "b"); err != nil || !ok {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	select {
	case <-seen:
	case <-time.After(5 * time.Second):
		t.Fatal("the release was not heard")
	}
	armed.Store(true)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the subscriber's Acquire hangs")
	}
}
