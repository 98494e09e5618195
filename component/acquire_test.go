package component_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/memory"
)

// takesThenFails takes the lock in the store and then fails, as a store
// whose reply is lost does: the caller knows nothing.
type takesThenFails struct{ *faulty }

func (d *takesThenFails) Acquire(ctx context.Context, req drivers.AcquireRequest) (drivers.AcquireResult, error) {
	if _, err := d.faulty.Acquire(ctx, req); err != nil {
		return drivers.AcquireResult{}, err
	}
	return drivers.AcquireResult{}, errors.New("connection reset")
}

// TestAcquireErrorReleases: an acquisition that failed with a store error
// may have taken the lock: it is released (for its token only), not left
// in everyone's way for its ttl.
func TestAcquireErrorReleases(t *testing.T) {
	for _, tc := range []struct {
		name    string
		acquire func(m *component.Mutex, ctx context.Context) (*component.Lock, error)
	}{
		{"Acquire", func(m *component.Mutex, ctx context.Context) (*component.Lock, error) { return m.Acquire(ctx, "x") }},
		{"TryAcquire", func(m *component.Mutex, ctx context.Context) (*component.Lock, error) { return m.TryAcquire(ctx, "x") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			component.Unpooled(t)
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				d := &takesThenFails{faulty: newFaulty()}
				m := newMutex(t, component.Options{Driver: d})
				l, err := tc.acquire(m, ctx)
				if l != nil || !errors.Is(err, component.ErrDriver) {
					t.Fatalf("%s = %v, %v; want a DriverError", tc.name, l, err)
				}
				synctest.Wait() // the release runs in the background
				if _, held, _ := d.Inspect(ctx, "mutex:x"); held {
					t.Fatal("the lock the failed call took was not released")
				}
			})
		})
	}
}

// TestNilAcquireOption: a nil option is skipped, the others apply.
func TestNilAcquireOption(t *testing.T) {
	m := newMutex(t, component.Options{})
	ctx := context.Background()
	l, err := m.Acquire(ctx, "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	if l2, err := m.TryAcquire(ctx, "x", nil, component.WithTTL(0)); l2 != nil || !errors.Is(err, component.ErrInvalidOption) {
		t.Fatalf("TryAcquire(nil, WithTTL(0)) = %v, %v; want the invalid ttl reported", l2, err)
	}
	if l2, err := m.Acquire(ctx, "x", nil, component.WithTimeout(component.NoWait), nil); l2 != nil || !errors.Is(err, component.ErrTimeout) {
		t.Fatalf("Acquire(nil, WithTimeout(NoWait), nil) of a held lock = %v, %v; want ErrTimeout", l2, err)
	}
	if err := m.Do(ctx, "y", func(context.Context, *component.Lock) error { return nil }, nil); err != nil {
		t.Fatal(err)
	}
	l.Release(ctx)
}

// TestTryAcquireLocked: TryAcquire of a lock another holder has — another
// Mutex, this one, or a waiter queued here — returns an error matching
// ErrLocked and naming the lock, never a nil Lock with a nil error.
func TestTryAcquireLocked(t *testing.T) {
	ctx := context.Background()
	d := memory.New()
	a := newMutex(t, component.Options{Driver: d})
	b := newMutex(t, component.Options{Driver: d})
	l, err := a.Acquire(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string]*component.Mutex{"the holder": a, "another Mutex": b} {
		got, err := m.TryAcquire(ctx, "x")
		if got != nil || !errors.Is(err, component.ErrLocked) || !strings.Contains(err.Error(), `"x"`) {
			t.Errorf("TryAcquire by %s = %v, %v; want ErrLocked naming \"x\"", name, got, err)
		}
		if errors.Is(err, component.ErrTimeout) {
			t.Errorf("TryAcquire by %s: %v matches ErrTimeout", name, err)
		}
	}
	l.Release(ctx)
	got, err := b.TryAcquire(ctx, "x")
	if got == nil || err != nil {
		t.Fatalf("TryAcquire of a free lock = %v, %v", got, err)
	}
	got.Release(ctx)
}

// TestTimeoutZero: a zero timeout is never one attempt. Options.Timeout 0
// is not set (the default); WithTimeout(0) is refused, naming NoWait;
// NoWait makes one attempt.
func TestTimeoutZero(t *testing.T) {
	ctx := context.Background()
	d := memory.New()
	m := newMutex(t, component.Options{Driver: d, Timeout: 0, RetryDelay: time.Millisecond})
	l, err := newMutex(t, component.Options{Driver: d}).Acquire(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Acquire(ctx, "x", component.WithTimeout(0))
	var oe *component.OptionError
	if !errors.As(err, &oe) || oe.Field != "Timeout" || !strings.Contains(err.Error(), "NoWait") {
		t.Fatalf("WithTimeout(0) = %v; want an OptionError on Timeout naming NoWait", err)
	}
	if _, err := m.Acquire(ctx, "x", component.WithTimeout(component.NoWait)); !errors.Is(err, component.ErrTimeout) {
		t.Fatalf("WithTimeout(NoWait) of a held lock = %v; want ErrTimeout", err)
	}
	// Options.Timeout 0 is the default wait: it gets the lock released
	// after a first attempt failed.
	got := make(chan error, 1)
	go func() {
		l2, err := m.Acquire(ctx, "x")
		if err == nil {
			l2.Release(ctx)
		}
		got <- err
	}()
	waitUntil(t, "a waiter queued", func() bool { return m.Waiters("x") > 0 })
	l.Release(ctx)
	if err := <-got; err != nil {
		t.Fatalf("Acquire with Timeout 0 (the default) = %v; want the lock", err)
	}
}

// slowFirst answers its first Acquire late (after the lock's ttl), ignoring
// its ctx, and the later ones at once.
type slowFirst struct {
	*faulty
	calls atomic.Int32
}

func (d *slowFirst) Acquire(ctx context.Context, req drivers.AcquireRequest) (drivers.AcquireResult, error) {
	if d.calls.Add(1) == 1 {
		time.Sleep(150 * time.Millisecond)
	}
	return d.faulty.Acquire(ctx, req)
}

// TestLateAnswerRetried: an attempt the store answered too late (after the
// lock's ttl: the lock is released) is a store failure like any other: a
// wait whose timeout is far off retries it, rather than ending with
// ErrTimeout long before its timeout.
func TestLateAnswerRetried(t *testing.T) {
	for _, timeout := range []time.Duration{10 * time.Second, component.Forever} {
		t.Run(timeout.String(), func(t *testing.T) {
			component.Unpooled(t)
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				d := &slowFirst{faulty: newFaulty()}
				m := newMutex(t, component.Options{Driver: d, TTL: 100 * time.Millisecond})
				l, err := m.Acquire(ctx, "x", component.WithTimeout(timeout))
				if err != nil {
					t.Fatalf("Acquire with timeout %v, first answer after the ttl: %v; want the lock from a later attempt", timeout, err)
				}
				if n := d.calls.Load(); n < 2 {
					t.Fatalf("%d attempts", n)
				}
				l.Release(ctx)
			})
		})
	}
}
