//go:build linux

package file_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/file"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestSweepExpiredHolders: the descriptor of a lock that expired without a
// later Extend or Release (its component lost it by its own timer) is
// closed by a later sweep instead of staying open until Close.
func TestSweepExpiredHolders(t *testing.T) {
	d := newDriver(t, t.TempDir())
	ctx := ctxT(t)
	before, perLock := openFDs(t), file.DescriptorsPerLock()
	if !acquire(t, d, "expiring", "a", 10*time.Millisecond).Acquired {
		t.Fatal("not acquired")
	}
	if got := openFDs(t); got != before+perLock {
		t.Fatalf("%d descriptors while holding, want %d", got, before+perLock)
	}
	expired(t, d, "expiring")
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

// sweep acquires and releases sweepEvery (64) locks through d, so that its
// sweep of expired holders runs.
func sweep(t *testing.T, d *file.Driver) {
	t.Helper()
	for i := range 64 {
		key := "sweep" + strconv.Itoa(i)
		if !acquire(t, d, key, "s", time.Minute).Acquired {
			t.Fatal("not acquired")
		}
		if ok, err := d.Release(ctxT(t), key, "s"); !ok || err != nil {
			t.Fatalf("Release: %v, %v", ok, err)
		}
	}
}

// TestSweepKeepsForeignExtend: a lock extended through another driver
// instance is not swept by its holder's driver when its first ttl passes:
// the sweep reads the record again and finds the new expiry, so a third
// driver does not take a lock the file says is held.
func TestSweepKeepsForeignExtend(t *testing.T) {
	dir := t.TempDir()
	d1, d2, d3 := newDriver(t, dir), newDriver(t, dir), newDriver(t, dir)
	ctx := ctxT(t)
	if !acquire(t, d1, "k", "T", 30*time.Millisecond).Acquired {
		t.Fatal("not acquired")
	}
	if ok, err := d2.Extend(ctx, "k", "T", time.Minute); !ok || err != nil {
		t.Fatalf("Extend through d2: %v, %v", ok, err)
	}
	time.Sleep(40 * time.Millisecond) // past the first ttl
	sweep(t, d1)
	if res := acquire(t, d3, "k", "X", time.Minute); res.Acquired {
		t.Fatalf("lock extended to a minute for T was taken by X: %+v", res)
	}
	if ok, err := d1.Extend(ctx, "k", "T", time.Minute); !ok || err != nil {
		t.Fatalf("Extend through d1: %v, %v", ok, err)
	}
	if ok, err := d1.Release(ctx, "k", "T"); !ok || err != nil {
		t.Fatalf("Release: %v, %v", ok, err)
	}
}

// TestReacquireClosesPrevious: a token taking its own expired lock again
// closes the descriptor of its earlier acquisition.
func TestReacquireClosesPrevious(t *testing.T) {
	d := newDriver(t, t.TempDir())
	before, perLock := openFDs(t), file.DescriptorsPerLock()
	for range 5 {
		if !acquire(t, d, "k", "same", 10*time.Millisecond).Acquired {
			t.Fatal("not acquired")
		}
		if got := openFDs(t); got != before+perLock {
			t.Fatalf("%d descriptors while holding, want %d", got, before+perLock)
		}
		expired(t, d, "k")
	}
	if err := d.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if got := openFDs(t); got != before {
		t.Fatalf("%d descriptors after Close, want %d", got, before)
	}
}

// TestReleaseEndedCtx: Release with a ctx that has already ended still
// releases a lock held through the driver.
func TestReleaseEndedCtx(t *testing.T) {
	dir := t.TempDir()
	d1, d2 := newDriver(t, dir), newDriver(t, dir)
	before := openFDs(t)
	if !acquire(t, d1, "k", "a", time.Hour).Acquired {
		t.Fatal("not acquired")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if ok, err := d1.Release(ctx, "k", "a"); !ok || err != nil {
		t.Fatalf("Release with an ended ctx: %v, %v; want true, nil", ok, err)
	}
	if got := openFDs(t); got != before {
		t.Fatalf("%d descriptors after Release, want %d", got, before)
	}
	if !acquire(t, d2, "k", "b", time.Hour).Acquired {
		t.Fatal("released lock not taken")
	}
	// A lock held elsewhere is not released with an ended ctx.
	if ok, err := d1.Release(ctx, "k", "b"); ok || !errors.Is(err, context.Canceled) {
		t.Fatalf("Release of d2's lock: %v, %v; want context.Canceled", ok, err)
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
	var last uint64
	for i := range 3 {
		res := acquire(t, d, "k", "t", time.Minute)
		if !res.Acquired || i > 0 && res.Fence != last+1 {
			t.Fatalf("Acquire: %+v, want fence %d", res, last+1)
		}
		last = res.Fence
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
	testutil.Poll(t, 5*time.Second, "k2 event", func() bool {
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

// expired waits until the store holds key's lock no more: its ttl ran out.
// The store sends no signal of an expiry: it is polled.
func expired(t *testing.T, d *file.Driver, key string) {
	t.Helper()
	testutil.Poll(t, 5*time.Second, "lock "+key+" to expire", func() bool {
		_, held, err := d.Inspect(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		return !held
	})
}
