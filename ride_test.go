package mutexfx_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mutexfx/mutexfx"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestAcquireRidesOutARedisRestart: a 5 s Acquire started while the Redis
// server is down succeeds once the server is back, instead of failing at
// its first store error.
func TestAcquireRidesOutARedisRestart(t *testing.T) {
	s := testutil.StartRedis(t)
	core, logs := observer.New(zap.WarnLevel)
	reg, err := mutexfx.Open(yamlConfig(t, "mutex:\n  r: {ttl: 1s, driver: {type: redis, url: \"redis://"+s.Addr+"\"}}\n"),
		allDrivers, mutexfx.WithLogger(zap.New(core)))
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(context.Background())
	m, _ := reg.Get("r")
	s.Kill()
	type result struct {
		l   *mutexfx.Lock
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		l, err := m.Acquire(context.Background(), "ride", mutexfx.WithTimeout(5*time.Second))
		done <- result{l, err}
	}()
	// the wait has met the dead store before it comes back
	for logs.FilterMessage("mutex store failed").Len() == 0 {
		select {
		case r := <-done:
			t.Fatalf("Acquire ended while the store was down: %v, %v", r.l, r.err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	s.Restart()
	r := <-done
	if r.err != nil || r.l == nil {
		t.Fatalf("Acquire = %v, %v after %v; want the lock once the store is back", r.l, r.err, time.Since(start))
	}
	if _, err := r.l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}
