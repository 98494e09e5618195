package redis

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
)

// BenchmarkRoundTrip compares one uncontended acquire+release, through the
// driver and through the component, with a PING on the same server (run
// with -count and compare the ns/op ratios; bench/redis has the side-by-side
// comparison with other libraries).
func BenchmarkRoundTrip(b *testing.B) {
	ctx := context.Background()
	d := standalone(b, Options{})
	key := "redisbench:" + strconv.FormatInt(time.Now().UnixNano(), 10)
	b.Run("Ping", func(b *testing.B) {
		for b.Loop() {
			if err := d.Client().Ping(ctx).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, wait := range []time.Duration{0, time.Second} {
		b.Run("Driver/wait="+wait.String(), func(b *testing.B) {
			for b.Loop() {
				res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "tok", TTL: 10 * time.Second, Wait: wait})
				if err != nil || !res.Acquired {
					b.Fatalf("%+v %v", res, err)
				}
				if ok, err := d.Release(ctx, key, "tok"); !ok || err != nil {
					b.Fatalf("%v %v", ok, err)
				}
			}
		})
	}
	m, err := component.New(component.Options{Driver: standalone(b, Options{}), Prefix: "redisbench:", Timeout: component.Forever})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close(ctx)
	for _, try := range []bool{true, false} {
		name := "Component/Acquire"
		if try {
			name = "Component/TryAcquire"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				var l *component.Lock
				var err error
				if try {
					l, err = m.TryAcquire(ctx, key)
				} else {
					l, err = m.Acquire(ctx, key)
				}
				if err != nil || l == nil {
					b.Fatalf("%v %v", l, err)
				}
				if ok, err := l.Release(ctx); !ok || err != nil {
					b.Fatalf("%v %v", ok, err)
				}
			}
		})
	}
}
