package postgres

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
)

// BenchmarkAcquireRelease is one acquire+release round through the driver
// on the shared PostgreSQL, in each mode; bench/postgres compares it with
// the bare statements.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, mode := range []string{ModeAdvisory, ModeTable} {
		b.Run(mode, func(b *testing.B) {
			ctx := context.Background()
			d := shared(b, Options{Mode: mode})
			key := "pgbench:" + rand.Text() + ":" + mode
			for b.Loop() {
				tok := rand.Text()
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
