//go:build linux

package file_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/file"
)

// TestSweepExpiredHolders: the descriptor of a lock that expired without a
// later Extend or Release (its component lost it by its own timer) is
// closed by a later sweep instead of staying open until Close.
func TestSweepExpiredHolders(t *testing.T) {
	d := newDriver(t, t.TempDir())
	ctx := ctxT(t)
	before := openFDs(t)
	if !acquire(t, d, "expiring", "a", 10*time.Millisecond).Acquired {
		t.Fatal("not acquired")
	}
	if got := openFDs(t); got != before+1 {
		t.Fatalf("%d descriptors while holding, want %d", got, before+1)
	}
	time.Sleep(20 * time.Millisecond) // let the ttl run out
	for i := range 64 {
		key := "other" + strconv.Itoa(i)
		if !acquire(t, d, key, "b", time.Minute).Acquired {
			t.Fatal("not acquired")
		}
		if ok, err := d.Release(ctx, key, "b"); !ok || err != nil {
			t.Fatalf("Release: %v, %v", ok, err)
		}
	}
	if got := openFDs(t); got != before {
		t.Fatalf("%d descriptors after the sweep, want %d", got, before)
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

// TestSync: with Sync every acquisition is flushed; fences still grow.
func TestSync(t *testing.T) {
	d, err := file.New(file.Options{Dir: filepath.Join(t.TempDir(), "new"), Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d.Close(ctxT(t)) }()
	for want := uint64(1); want <= 3; want++ {
		res := acquire(t, d, "k", "t", time.Minute)
		if !res.Acquired || res.Fence != want {
			t.Fatalf("Acquire: %+v, want fence %d", res, want)
		}
		if ok, err := d.Release(ctxT(t), "k", "t"); !ok || err != nil {
			t.Fatalf("Release: %v, %v", ok, err)
		}
	}
}

// TestSubscribeInProcess: releases through a driver reach every subscriber
// of that driver at once; a cancelled subscription gets nothing more.
func TestSubscribeInProcess(t *testing.T) {
	d := newDriver(t, t.TempDir())
	ctx := ctxT(t)
	chans := make([]chan drivers.Event, 2)
	cancels := make([]func(), 2)
	for i := range chans {
		ch := make(chan drivers.Event, 8)
		chans[i] = ch
		cancel, err := d.Subscribe(ctx, func(e drivers.Event) { ch <- e })
		if err != nil {
			t.Fatal(err)
		}
		cancels[i] = cancel
	}
	cycle := func(key string) {
		t.Helper()
		if !acquire(t, d, key, "a", time.Minute).Acquired {
			t.Fatal("not acquired")
		}
		if acquire(t, d, key, "b", time.Minute).Acquired { // contention starts the watcher
			t.Fatal("acquired twice")
		}
		if ok, err := d.Release(ctx, key, "a"); !ok || err != nil {
			t.Fatalf("Release: %v, %v", ok, err)
		}
	}
	cycle("k1")
	for i, ch := range chans {
		select {
		case e := <-ch:
			if e.Kind != drivers.Released || e.Key != "k1" {
				t.Fatalf("subscriber %d: %+v", i, e)
			}
		default:
			t.Fatalf("subscriber %d got no event during Release", i)
		}
	}
	cancels[0]()
	cancels[0]() // idempotent
	cycle("k2")
	waitFor(t, 5*time.Second, "k2 event", func() bool {
		for len(chans[1]) > 0 {
			if e := <-chans[1]; e.Key == "k2" {
				return true
			}
		}
		return false
	})
	for len(chans[0]) > 0 { // k1 may have been echoed by the watcher, k2 never
		if e := <-chans[0]; e.Key == "k2" {
			t.Fatalf("cancelled subscriber got %+v", e)
		}
	}
	cancels[1]()
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Subscribe(ctx, func(drivers.Event) {}); !errors.Is(err, file.ErrClosed) {
		t.Fatalf("Subscribe after Close: %v", err)
	}
}
