package postgres

import (
	"context"
	"crypto/rand"
	"fmt"
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

// BenchmarkExtend is one Extend of a held lock, in each mode.
func BenchmarkExtend(b *testing.B) {
	for _, mode := range []string{ModeAdvisory, ModeTable} {
		b.Run(mode, func(b *testing.B) {
			ctx := context.Background()
			d := shared(b, Options{Mode: mode})
			key, tok := "pgbench:extend:"+rand.Text()+":"+mode, rand.Text()
			if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: 10 * time.Second}); err != nil || !res.Acquired {
				b.Fatalf("Acquire = %+v, %v", res, err)
			}
			for b.Loop() {
				if ok, err := d.Extend(ctx, key, tok, 10*time.Second); err != nil || !ok {
					b.Fatalf("Extend = %v, %v", ok, err)
				}
			}
		})
	}
}

// BenchmarkHandover is one Handover of a held lock nobody else waits for
// (it passes the lock on), in each mode.
func BenchmarkHandover(b *testing.B) {
	for _, opts := range []Options{{Mode: ModeAdvisory}, {Mode: ModeTable}, {Mode: ModeTable, Table: "mutexfx_locks_bench_unlogged", Unlogged: true}} {
		b.Run(fmt.Sprintf("%s,unlogged=%v", opts.Mode, opts.Unlogged), func(b *testing.B) {
			ctx := context.Background()
			d := shared(b, opts)
			key, tok := "pgbench:handover:"+rand.Text(), rand.Text()
			if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: 10 * time.Second}); err != nil || !res.Acquired {
				b.Fatalf("Acquire = %+v, %v", res, err)
			}
			for b.Loop() {
				next := rand.Text()
				released, res, err := d.Handover(ctx, key, tok, drivers.AcquireRequest{Key: key, Token: next, TTL: 10 * time.Second})
				if err != nil || !released || !res.Acquired {
					b.Fatalf("Handover = %v, %+v, %v", released, res, err)
				}
				tok = next
			}
		})
	}
}
