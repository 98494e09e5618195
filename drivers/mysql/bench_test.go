package mysql

import (
	"context"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// BenchmarkAcquireRelease is one acquire+release round through the driver
// on the shared MariaDB; the side-by-side comparison with the bare
// statements is bench/mysql.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"advisory", Options{DSN: testutil.MySQLDSN()}},
		{"advisory-uuid_short", Options{DSN: testutil.MySQLDSN(), Fence: FenceUUIDShort}},
		{"advisory-counter", Options{DSN: testutil.MySQLDSN(), Fence: FenceCounter, FenceTable: "mutexfx_test_fence_counter"}},
		{"table", Options{DSN: testutil.MySQLDSN(), Mode: ModeTable, Table: "mutexfx_test_locks"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			d := openDriver(b, tc.opts)
			key := "mysqlbench:" + runID + ":" + tc.name
			for b.Loop() {
				tok := token() + "~bench~host-1~4242~x" // a Mutex's layout: a holder identity
				res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: 10 * time.Second})
				if err != nil || !res.Acquired {
					b.Fatalf("Acquire = %+v, %v", res, err)
				}
				if ok, err := d.Release(ctx, key, tok); err != nil || !ok {
					b.Fatalf("Release = %v, %v", ok, err)
				}
			}
		})
	}
}
