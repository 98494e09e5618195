//go:build linux

package file

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
)

// TestMechanismsMixedFreeLock: two drivers of one directory configured
// with different mechanisms never both take a free lock. Driver a's
// acquisition is driven step by step: it takes its guard and reads the
// record, free; b then tries the same lock; then a finishes (takes its
// liveness lock, writes its record). Before, the guards of the two
// mechanisms did not exclude each other: b read the same free record and
// took the lock, and a took it too, with the same fence (as two processes
// starting at once each took a free lock). Now b cannot
// take its guard while a is inside its section (here it gives up after
// its busyTimeout: ErrBusy), and once a's record is written, b fails with
// ErrMechanism.
func TestMechanismsMixedFreeLock(t *testing.T) {
	mechs := []Mechanism{MechanismOFD, MechanismFlock}
	for i, am := range mechs {
		bm := mechs[1-i]
		t.Run(string(am)+" first", func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			a := mechDriver(t, Options{Dir: dir, Mechanism: am})
			b := mechDriver(t, Options{Dir: dir, Mechanism: bm, BusyTimeout: 20 * time.Millisecond})
			name := fileName("k")
			path := a.path(name)
			reqA := drivers.AcquireRequest{Key: "k", Token: "a", TTL: time.Minute}
			reqB := drivers.AcquireRequest{Key: "k", Token: "b", TTL: time.Minute}
			// a free record with a fence
			if res, err := a.Acquire(ctx, drivers.AcquireRequest{Key: "k", Token: "a0", TTL: time.Minute}); err != nil || !res.Acquired {
				t.Fatalf("Acquire = %+v, %v", res, err)
			}
			if ok, err := a.Release(ctx, "k", "a0"); err != nil || !ok {
				t.Fatalf("Release = %v, %v", ok, err)
			}

			// a's acquireLocked, up to its read of the free record
			fd, err := a.open(name, false)
			if err != nil {
				t.Fatal(err)
			}
			if err := lockState(ctx, a.lk, fd, a.opts.BusyTimeout); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, recMax)
			var rec record
			if err := readRecord(a.lk, fd, buf, &rec); err != nil || rec.held() {
				t.Fatalf("a reads %+v, %v; want a free record", rec, err)
			}

			// b, while a is inside its section
			resB, errB := b.Acquire(ctx, reqB)

			// a finishes
			fence := nextFence(rec.fence)
			h := &holder{fd: fd, live: noHandle, fence: fence, path: path}
			if h.live, err = a.lk.hold(fd, path, int64(fence)+1); err != nil {
				t.Fatal(err)
			}
			if err := a.publish(fd, buf, reqA, h, false); err != nil {
				t.Fatal(err)
			}
			if !a.addHolder(reqA.Key, reqA.Token, h) {
				t.Fatal("a closed")
			}

			if resB.Acquired {
				t.Fatalf("the %s driver took the lock (fence %d) while the %s driver, inside its guard, had read it free; that one took it too (fence %d): two holders",
					bm, resB.Fence, am, fence)
			}
			if !errors.Is(errB, ErrBusy) {
				t.Fatalf("%s Acquire while a is inside its section: %+v, %v; want ErrBusy", bm, resB, errB)
			}
			if res, err := b.Acquire(ctx, reqB); !errors.Is(err, ErrMechanism) {
				t.Fatalf("%s Acquire of the lock a holds: %+v, %v; want ErrMechanism", bm, res, err)
			}
			if info, held, err := a.Inspect(ctx, "k"); err != nil || !held || info.Token != "a" || info.Fence != fence {
				t.Fatalf("Inspect = %+v, %v, %v; want a's lock, fence %d", info, held, err, fence)
			}
		})
	}
}

// mechDriver is a driver of opts closed at the end of the test.
func mechDriver(t *testing.T, opts Options) *Driver {
	t.Helper()
	d, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close(context.Background()) })
	return d
}

// TestSweepForgetsLostLiveness: with MechanismFlock, the periodic sweep
// that drops an expired holder whose lock file was lost (lossCases)
// deletes the holder's liveness file, as Release and Extend do: no later
// acquisition at the path deletes it. Before, the sweep only closed the
// holder's descriptors, and the liveness file stayed in the directory.
func TestSweepForgetsLostLiveness(t *testing.T) {
	for _, tc := range lossCases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir() + "/locks"
			d := mechDriver(t, Options{Dir: dir, Mechanism: MechanismFlock})
			res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: "k", Token: "a", TTL: time.Nanosecond})
			if err != nil || !res.Acquired {
				t.Fatalf("Acquire = %+v, %v", res, err)
			}
			path := d.path(fileName("k"))
			live := livePath(path, int64(res.Fence)+1)
			if _, err := os.Lstat(live); err != nil {
				t.Fatalf("liveness file while held: %v", err)
			}
			tc.lose(t, dir, path)
			// the acquisitions up to the next sweep (its ttl of 1 ns has
			// passed by then)
			for i := range sweepEvery - 1 {
				key := fmt.Sprintf("other%d", i)
				if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "b", TTL: time.Minute}); err != nil || !res.Acquired {
					t.Fatalf("Acquire(%s) = %+v, %v", key, res, err)
				}
				if ok, err := d.Release(ctx, key, "b"); err != nil || !ok {
					t.Fatalf("Release(%s) = %v, %v", key, ok, err)
				}
			}
			if d.holderOf("k", "a") != nil {
				t.Fatal("the sweep kept the lost holder")
			}
			if _, err := os.Lstat(live); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("the lost holder's liveness file after the sweep: %v; want it deleted", err)
			}
		})
	}
}
