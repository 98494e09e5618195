package redis

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers/drivertest"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

const faultTTL = time.Second

// newMutex builds a component with a 1 s ttl on a new driver at addr; both
// are closed at the end of the test.
func newMutex(t testing.TB, addr string) *component.Mutex {
	t.Helper()
	return newMutexWith(t, Options{Addrs: []string{addr}})
}

// newMutexWith is newMutex on a driver built with opts.
func newMutexWith(t testing.TB, opts Options) *component.Mutex {
	t.Helper()
	d, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	drivertest.CloseAtEnd(t, d)
	return drivertest.Mutex(t, component.Options{Driver: d, Prefix: "redistest:", TTL: faultTTL, RetryDelay: 10 * time.Millisecond})
}

// lostBy waits for l's lost signal and fails unless it fires by deadline.
//
// On a busy machine every goroutine of the process may wake late, this
// test's as much as the component's timer (which is due before deadline:
// the tracked expiry counts from before the acquisition and less the
// drift). So the test arms its own timer for deadline: the signal may come
// after it only within a scheduling slack of when that timer woke this
// goroutine, a measure of how late the process runs then. On an idle
// machine that is deadline plus the slack.
func lostBy(t *testing.T, l *component.Lock, deadline time.Time) {
	t.Helper()
	const slack = 20 * time.Millisecond
	own := time.NewTimer(time.Until(deadline))
	defer own.Stop()
	select {
	case <-l.Done():
	case <-own.C:
		woke := time.Now()
		select {
		case <-l.Done():
		case <-time.After(2 * time.Second):
			t.Fatalf("lock %q never lost", l.Name())
		}
		if late := time.Since(woke); late > slack {
			t.Fatalf("lock %q lost %v after its expiry, %v after this test's timer for it woke (%v late)",
				l.Name(), time.Since(deadline), late, woke.Sub(deadline))
		}
	}
	if !errors.Is(context.Cause(l.Context()), component.ErrLost) {
		t.Fatalf("lock %q ended with %v; want ErrLost", l.Name(), context.Cause(l.Context()))
	}
}

// TestServerKilledAndRestarted: kill -9 the server while locks are held:
// the holders lose them no later than their expiry and calls fail with
// ErrDriver at once; restarted without persistence, fences still grow.
func TestServerKilledAndRestarted(t *testing.T) {
	s := testutil.StartRedis(t)
	known(t, s)
	m := newMutex(t, s.Addr)
	ctx := t.Context()
	held := map[string]*component.Lock{}
	for _, n := range []string{"a", "b", "c"} {
		l, err := m.Acquire(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		held[n] = l
	}
	f1 := held["a"].Fence()
	killed := time.Now()
	s.Kill()
	for _, l := range held {
		lostBy(t, l, killed.Add(faultTTL))
	}
	start := time.Now()
	_, err := m.Acquire(ctx, "d", component.WithTimeout(component.NoWait))
	if !errors.Is(err, component.ErrDriver) || time.Since(start) > 100*time.Millisecond {
		t.Fatalf("Acquire on a dead server = %v after %v; want ErrDriver at once", err, time.Since(start))
	}

	s.Restart()
	var l *component.Lock
	waitFor(t, "acquisitions work after the restart", func() bool {
		l, err = m.Acquire(ctx, "a", component.WithTimeout(component.NoWait))
		return err == nil
	})
	if f2 := l.Fence(); f2 <= f1 {
		t.Fatalf("fence after restart %d <= fence before %d", f2, f1)
	}
}

// TestConnectionFaults: a link that stalls or breaks (a TCP proxy between
// the driver and the server): the lost signal fires before the expiry and
// no goroutine is left behind once the component is closed.
func TestConnectionFaults(t *testing.T) {
	tests := []struct {
		name        string
		fault, heal func(p *testutil.Proxy)
	}{
		{"stall", (*testutil.Proxy).Stall, (*testutil.Proxy).Resume},
		{"cut", (*testutil.Proxy).Cut, (*testutil.Proxy).Heal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ignore := goleak.IgnoreCurrent()
			p := testutil.NewProxy(t, testutil.RedisAddr())
			d, err := New(Options{Addrs: []string{p.Addr}})
			if err != nil {
				t.Fatal(err)
			}
			m, err := component.New(component.Options{Driver: d, Prefix: "redistest:", TTL: faultTTL})
			if err != nil {
				t.Fatal(err)
			}
			l, err := m.Acquire(t.Context(), t.Name()+strconv.FormatInt(time.Now().UnixNano(), 10))
			if err != nil {
				t.Fatal(err)
			}
			faulted := time.Now()
			tt.fault(p)
			lostBy(t, l, faulted.Add(faultTTL))
			tt.heal(p)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := m.Close(ctx); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if err := d.Close(ctx); err != nil {
				t.Fatalf("driver Close: %v", err)
			}
			p.Close()
			goleak.VerifyNone(t, ignore)
		})
	}
}

// TestHolderProcessKilled: a holder process killed with -9; another
// process gets the lock at most one ttl later.
func TestHolderProcessKilled(t *testing.T) {
	name := "holder-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	cmd, line := testutil.StartHolder(t, "hold", "REDISTEST_ADDR="+testutil.RedisAddr(), "REDISTEST_NAME="+name)
	childFence, err := strconv.ParseUint(strings.TrimPrefix(line, "held "), 10, 64)
	if err != nil {
		t.Fatalf("child said %q", line)
	}
	m := newMutex(t, testutil.RedisAddr())
	if l, err := m.TryAcquire(t.Context(), name); !errors.Is(err, component.ErrLocked) {
		t.Fatalf("TryAcquire of the child's lock = %v, %v; want ErrLocked", l, err)
	}
	killed := testutil.KillHolder(t, cmd)
	l, err := m.Acquire(t.Context(), name, component.WithTimeout(3*faultTTL))
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(killed); took > faultTTL+100*time.Millisecond {
		t.Fatalf("lock of the killed holder taken %v after the kill; want <= %v", took, faultTTL)
	}
	if l.Fence() <= childFence {
		t.Fatalf("fence %d <= the dead holder's %d", l.Fence(), childFence)
	}
}

// childHold acquires REDISTEST_NAME, prints "held <fence>" and waits to be
// killed.
func childHold() int {
	d, err := New(Options{Addrs: []string{os.Getenv("REDISTEST_ADDR")}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	m, err := component.New(component.Options{Driver: d, Prefix: "redistest:", TTL: faultTTL})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	l, err := m.Acquire(context.Background(), os.Getenv("REDISTEST_NAME"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("held %d\n", l.Fence())
	select {}
}
