package redis

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/drivertest"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestSentinelConformance runs the conformance suite through a real
// Sentinel (one master, one replica, one Sentinel started from the local
// binaries), with passwords on the data nodes and on the Sentinel.
func TestSentinelConformance(t *testing.T) {
	s := testutil.StartRedisSentinel(t, testutil.SentinelOptions{
		Replica: true, Password: secret, SentinelPassword: secret + "-s",
	})
	knownSentinel(t, s)
	opts := Options{Addrs: []string{s.Addr}, MasterName: s.MasterName, Password: secret, SentinelPassword: secret + "-s"}
	drivertest.Run(t, drivertest.Harness{New: func(t testing.TB) drivers.Driver {
		d, err := New(opts)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return d
	}})
}

// TestSentinelAuth: the Sentinel's own credentials (a requirepass, or an ACL
// user) and the master's, from configuration keys through the Factory; wrong
// ones fail the first call with ErrDriver and no password in the message.
func TestSentinelAuth(t *testing.T) {
	const dataPass, sentinelPass = secret + "-data", secret + "-sentinel"
	tests := []struct {
		name     string
		sentinel testutil.SentinelOptions
		keys     map[string]any // driver keys beside addrs and masterName
		ok       bool
	}{
		{"sentinel requirepass",
			testutil.SentinelOptions{Password: dataPass, SentinelPassword: sentinelPass},
			map[string]any{"password": dataPass, "sentinelPassword": sentinelPass}, true},
		{"sentinel ACL user",
			testutil.SentinelOptions{Password: dataPass, SentinelUsername: "watcher", SentinelPassword: sentinelPass},
			map[string]any{"password": dataPass, "sentinelUsername": "watcher", "sentinelPassword": sentinelPass}, true},
		{"wrong sentinel password",
			testutil.SentinelOptions{Password: dataPass, SentinelPassword: sentinelPass},
			map[string]any{"password": dataPass, "sentinelPassword": secret + "-wrong"}, false},
		{"wrong sentinel user",
			testutil.SentinelOptions{SentinelUsername: "watcher", SentinelPassword: sentinelPass},
			map[string]any{"sentinelUsername": "nobody", "sentinelPassword": sentinelPass}, false},
		{"no sentinel password",
			testutil.SentinelOptions{SentinelPassword: sentinelPass},
			map[string]any{}, false},
		{"wrong master password",
			testutil.SentinelOptions{Password: dataPass, SentinelPassword: sentinelPass},
			map[string]any{"password": secret + "-wrong", "sentinelPassword": sentinelPass}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := testutil.StartRedisSentinel(t, tt.sentinel)
			knownSentinel(t, s)
			keys := map[string]any{"addrs": []any{s.Addr}, "masterName": s.MasterName, "dialTimeout": "1s"}
			for k, v := range tt.keys {
				keys[k] = v
			}
			d, err := Factory().New(drivers.Spec{Path: "mutex.orders.driver", Options: keys, Logger: zap.NewNop()})
			if err != nil {
				t.Fatalf("Factory: %v", err)
			}
			m, err := component.New(component.Options{Driver: d, Prefix: "redistest:", TTL: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = m.Close(context.Background())
				_ = d.Close(context.Background())
			})
			l, err := m.Acquire(t.Context(), "auth", component.WithTimeout(component.NoWait))
			if !tt.ok {
				if !errors.Is(err, component.ErrDriver) {
					t.Fatalf("Acquire = %v; want ErrDriver", err)
				}
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("error %q contains a password", err)
				}
				t.Logf("refused: %v", err)
				return
			}
			if err != nil {
				t.Fatalf("Acquire: %v", err)
			}
			if got, err := s.Master.Command("GET", lockKey("redistest:auth")); err != nil || got != l.Token() {
				t.Fatalf("lock key on the master = %q, %v; want the token %q", got, err, l.Token())
			}
			if ok, err := l.Extend(t.Context(), 2*time.Second); !ok || err != nil {
				t.Fatalf("Extend = %v, %v", ok, err)
			}
			if ok, err := l.Release(t.Context()); !ok || err != nil {
				t.Fatalf("Release = %v, %v", ok, err)
			}
		})
	}
}

// TestSentinelFailover: kill -9 the master while locks are held. Calls fail
// at once with ErrDriver until Sentinel promotes the replica; the holders lose their locks no later than their
// expiry (or keep them only if their renewals reached the new master, which
// then holds their keys); the same driver then reaches the new master, new
// acquisitions work, exclude other drivers, and fences keep growing.
func TestSentinelFailover(t *testing.T) {
	s := testutil.StartRedisSentinel(t, testutil.SentinelOptions{Replica: true, DownAfter: 300 * time.Millisecond})
	knownSentinel(t, s)
	newSentinelMutex := func() *component.Mutex {
		return newMutexWith(t, Options{Addrs: []string{s.Addr}, MasterName: s.MasterName, DialTimeout: time.Second})
	}
	m := newSentinelMutex()
	ctx := t.Context()
	names := []string{"a", "b", "c"}
	held := map[string]*component.Lock{}
	for _, n := range names {
		l, err := m.Acquire(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		held[n] = l
	}
	f1 := held["a"].Fence()
	// The replica has the keys before the master dies (replication is
	// asynchronous; this makes the "kept" case below possible to reach).
	waitFor(t, "replica has the lock keys", func() bool {
		v, err := s.Replica.Command("GET", lockKey("redistest:c"))
		return err == nil && v == held["c"].Token()
	})

	old := s.Master.Addr
	killed := time.Now()
	s.Master.Kill()
	start := time.Now()
	if _, err := m.Acquire(ctx, "d", component.WithTimeout(component.NoWait)); !errors.Is(err, component.ErrDriver) || time.Since(start) > 100*time.Millisecond {
		t.Fatalf("Acquire while the master is down = %v after %v; want ErrDriver at once", err, time.Since(start))
	}
	lost := 0
	for _, n := range names {
		l := held[n]
		select {
		case <-l.Done():
			if now := time.Now(); now.After(killed.Add(faultTTL + 20*time.Millisecond)) {
				t.Fatalf("lock %q lost %v after its expiry", n, now.Sub(killed.Add(faultTTL)))
			}
			if !errors.Is(context.Cause(l.Context()), component.ErrLost) {
				t.Fatalf("lock %q ended with %v; want ErrLost", n, context.Cause(l.Context()))
			}
			lost++
		case <-time.After(time.Until(killed.Add(faultTTL + 20*time.Millisecond))):
			// Not lost by its expiry: then a renewal reached the promoted
			// replica, which must hold the key for this holder.
			next := s.WaitFailover(t, old)
			if v, err := next.Command("GET", lockKey("redistest:"+n)); err != nil || v != l.Token() || !l.Held() {
				t.Fatalf("lock %q not lost by its expiry, yet the new master has %q (%v), held %v", n, v, err, l.Held())
			}
		}
	}
	next := s.WaitFailover(t, old)
	t.Logf("failover %s -> %s after %v; %d of %d locks lost by their expiry", old, next.Addr,
		time.Since(killed).Round(time.Millisecond), lost, len(names))

	for _, n := range names { // kept locks are released on the new master
		if l := held[n]; l.Held() {
			if ok, err := l.Release(ctx); !ok || err != nil {
				t.Fatalf("Release of kept lock %q = %v, %v", n, ok, err)
			}
		}
	}

	var l *component.Lock
	testutil.Poll(t, faultTTL+5*time.Second, "an acquisition after the failover", func() bool {
		l, _ = m.Acquire(ctx, "a", component.WithTimeout(component.NoWait))
		return l != nil
	})
	if f2 := l.Fence(); f2 <= f1 {
		t.Fatalf("fence after failover %d <= fence before %d", f2, f1)
	}
	if v, err := next.Command("GET", lockKey("redistest:a")); err != nil || v != l.Token() {
		t.Fatalf("new master has %q, %v for the new lock; want its token", v, err)
	}
	other := newSentinelMutex()
	if _, err := other.Acquire(ctx, "a", component.WithTimeout(component.NoWait)); !errors.Is(err, component.ErrTimeout) {
		t.Fatalf("second driver's TryAcquire of a held lock = %v; want ErrTimeout", err)
	}
	got := make(chan error, 1)
	go func() {
		l2, err := other.Acquire(ctx, "a", component.WithTimeout(5*time.Second))
		if err == nil {
			_, err = l2.Release(ctx)
		}
		got <- err
	}()
	if ok, err := l.Release(ctx); !ok || err != nil {
		t.Fatalf("Release on the new master = %v, %v", ok, err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiting acquisition after the failover: %v", err)
	}
}
