//go:build linux

package file

import (
	"context"
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mutexfx/mutexfx/drivers"
)

// TestBusyTimeout: a process stuck inside a lock file's critical section
// (here: a descriptor of the test holding the guard byte) makes calls fail
// after BusyTimeout, or when their ctx ends, instead of hanging.
func TestBusyTimeout(t *testing.T) {
	dir := t.TempDir()
	const busy = 80 * time.Millisecond
	d, err := New(Options{Dir: dir, BusyTimeout: busy})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d.Close(context.Background()) }()
	ctx := context.Background()
	if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: "k", Token: "a", TTL: time.Minute}); err != nil || !res.Acquired {
		t.Fatalf("Acquire: %+v, %v", res, err)
	}
	fd := guardHeld(t, d, "k")
	calls := []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"acquire", func(ctx context.Context) error {
			_, err := d.Acquire(ctx, drivers.AcquireRequest{Key: "k", Token: "b", TTL: time.Minute})
			return err
		}},
		{"extend", func(ctx context.Context) error { _, err := d.Extend(ctx, "k", "a", time.Minute); return err }},
		{"renew", func(ctx context.Context) error {
			return d.Renew(ctx, []drivers.Lease{{Key: "k", Token: "a", TTL: time.Minute}})[0].Err
		}},
	}
	for _, c := range calls {
		t.Run(c.name+"/busy timeout", func(t *testing.T) {
			start := time.Now()
			err := c.call(ctx)
			if !errors.Is(err, ErrBusy) {
				t.Fatalf("err %v, want ErrBusy", err)
			}
			if el := time.Since(start); el < busy || el > busy+time.Second {
				t.Errorf("gave up after %v, want about %v", el, busy)
			}
		})
		t.Run(c.name+"/ctx", func(t *testing.T) {
			cctx, cancel := context.WithTimeoutCause(ctx, 20*time.Millisecond, errStuck)
			defer cancel()
			if err := c.call(cctx); !errors.Is(err, errStuck) {
				t.Fatalf("err %v, want the ctx's cause", err)
			}
		})
	}
	// Once the section is left, the holder still holds.
	if err := d.lk.unguard(fd); err != nil {
		t.Fatal(err)
	}
	if ok, err := d.Extend(ctx, "k", "a", time.Minute); !ok || err != nil {
		t.Fatalf("Extend after: %v, %v", ok, err)
	}
	if ok, err := d.Release(ctx, "k", "a"); !ok || err != nil {
		t.Fatalf("Release after: %v, %v", ok, err)
	}
}

var errStuck = errors.New("stuck")

// TestReleaseEndedCtxBusy: Release with an ended ctx, the guard byte held
// elsewhere, fails with the ctx's cause but still closes the holder's
// descriptor, freeing the lock as a dead holder's.
func TestReleaseEndedCtxBusy(t *testing.T) {
	dir := t.TempDir()
	d, err := New(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d.Close(context.Background()) }()
	res, err := d.Acquire(context.Background(), drivers.AcquireRequest{Key: "k", Token: "a", TTL: time.Minute})
	if err != nil || !res.Acquired {
		t.Fatalf("Acquire: %+v, %v", res, err)
	}
	fd := guardHeld(t, d, "k")
	live := int64(res.Fence) + 1
	path := d.path(fileName("k"))
	if alive, err := d.lk.alive(fd, path, live); !alive || err != nil {
		t.Fatalf("liveness byte before: %v, %v", alive, err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errStuck)
	if ok, err := d.Release(ctx, "k", "a"); ok || !errors.Is(err, errStuck) {
		t.Fatalf("Release: %v, %v; want the ctx's cause", ok, err)
	}
	if alive, err := d.lk.alive(fd, path, live); alive || err != nil {
		t.Fatalf("liveness byte after Release: %v, %v; want unlocked", alive, err)
	}
}

// guardHeld opens key's lock file on a descriptor of the test (closed at
// the test's end) and takes its guard with d's mechanism, as a process
// stuck inside the critical section would; it returns the descriptor.
func guardHeld(t *testing.T, d *Driver, key string) int {
	t.Helper()
	fd, err := unix.Open(d.path(fileName(key)), unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if ok, err := d.lk.tryGuard(fd); !ok || err != nil {
		t.Fatalf("tryGuard: %v, %v", ok, err)
	}
	return fd
}
