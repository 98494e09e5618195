//go:build linux

package file_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/file"
)

// BenchmarkAcquireRelease measures one uncontended acquisition and its
// release (open, guard byte, read, liveness byte, write, unguard; then guard,
// read, write, close).
func BenchmarkAcquireRelease(b *testing.B) {
	d := newDriver(b, b.TempDir())
	ctx := context.Background()
	req := drivers.AcquireRequest{Key: "mutex:bench", Token: "0123456789abcdef0123456789abcdef", TTL: 30 * time.Second}
	b.ReportAllocs()
	for b.Loop() {
		res, err := d.Acquire(ctx, req)
		if err != nil || !res.Acquired {
			b.Fatalf("Acquire: %+v, %v", res, err)
		}
		if ok, err := d.Release(ctx, req.Key, req.Token); err != nil || !ok {
			b.Fatalf("Release: %v, %v", ok, err)
		}
	}
}

// BenchmarkAcquireBusy measures a failed attempt on a lock another driver
// instance holds (a waiter's poll).
func BenchmarkAcquireBusy(b *testing.B) {
	dir := b.TempDir()
	holder, waiter := newDriver(b, dir), newDriver(b, dir)
	ctx := context.Background()
	if res, err := holder.Acquire(ctx, drivers.AcquireRequest{Key: "k", Token: "holder-token-0123456789", TTL: time.Minute}); err != nil || !res.Acquired {
		b.Fatalf("Acquire: %+v, %v", res, err)
	}
	req := drivers.AcquireRequest{Key: "k", Token: "waiter-token-0123456789", TTL: time.Minute}
	b.ReportAllocs()
	for b.Loop() {
		if res, err := waiter.Acquire(ctx, req); err != nil || res.Acquired {
			b.Fatalf("Acquire: %+v, %v", res, err)
		}
	}
}

// BenchmarkRenew measures a batched renewal of 16 held locks.
func BenchmarkRenew(b *testing.B) {
	d := newDriver(b, b.TempDir())
	ctx := context.Background()
	leases := make([]drivers.Lease, 16)
	for i := range leases {
		leases[i] = drivers.Lease{Key: "k" + strconv.Itoa(i), Token: "token-0123456789abcdef-" + strconv.Itoa(i), TTL: time.Minute}
		if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: leases[i].Key, Token: leases[i].Token, TTL: time.Minute}); err != nil || !res.Acquired {
			b.Fatalf("Acquire: %+v, %v", res, err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, r := range d.Renew(ctx, leases) {
			if r.Err != nil || !r.Held {
				b.Fatalf("Renew: %+v", r)
			}
		}
	}
}

func newDriver(tb testing.TB, dir string) *file.Driver {
	tb.Helper()
	return newDriverWith(tb, file.Options{Dir: dir})
}

func newDriverWith(tb testing.TB, opts file.Options) *file.Driver {
	tb.Helper()
	d, err := file.New(opts)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	tb.Cleanup(func() { _ = d.Close(context.Background()) })
	return d
}
