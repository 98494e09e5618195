package component_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/memory"
)

// downFor fails the first failures acquisitions with err, as a store in a
// fail-over does, then serves them from memory.
type downFor struct {
	*memory.Driver
	failures int32
	err      error
	calls    atomic.Int32
}

func (d *downFor) Acquire(ctx context.Context, req drivers.AcquireRequest) (drivers.AcquireResult, error) {
	if d.calls.Add(1) <= d.failures {
		return drivers.AcquireResult{}, d.err
	}
	return d.Driver.Acquire(ctx, req)
}

// (Not in a synctest bubble: the component's waiters are pooled, and a
// pooled waiter's channel belongs to the bubble that made it.)

// TestAcquireRidesOutStoreErrors: a wait retries store errors with its
// backoff until the store answers; a permanent error ends it at once; a
// store failing to the end gives ErrTimeout wrapping its last error.
func TestAcquireRidesOutStoreErrors(t *testing.T) {
	transient := errors.New("connection refused")
	for _, tc := range []struct {
		name     string
		failures int32
		err      error
		timeout  time.Duration
		check    func(t *testing.T, l *component.Lock, err error, d *downFor)
	}{
		{"recovers", 5, transient, 5 * time.Second, func(t *testing.T, l *component.Lock, err error, d *downFor) {
			if err != nil || l == nil || d.calls.Load() != 6 {
				t.Fatalf("Acquire = %v, %v after %d calls; want the lock at the 6th", l, err, d.calls.Load())
			}
		}},
		{"permanent", 100, drivers.Permanent(errors.New("password authentication failed")), 5 * time.Second, func(t *testing.T, l *component.Lock, err error, d *downFor) {
			var de *component.DriverError
			if !errors.As(err, &de) || errors.Is(err, component.ErrTimeout) || d.calls.Load() != 1 {
				t.Fatalf("Acquire = %v after %d calls; want the DriverError of the first", err, d.calls.Load())
			}
		}},
		{"down to the end", 1 << 30, transient, 300 * time.Millisecond, func(t *testing.T, l *component.Lock, err error, d *downFor) {
			want := `mutexfx: timeout waiting for lock: "x" not acquired within 300ms; the store failed at the last attempt: mutexfx: store "mutex": acquire "x": connection refused`
			if !errors.Is(err, component.ErrTimeout) || !errors.Is(err, component.ErrDriver) || err.Error() != want {
				t.Fatalf("Acquire = %v;\nwant %s", err, want)
			}
			if n := d.calls.Load(); n < 3 || n > 20 {
				t.Fatalf("%d attempts in 300 ms from a 1 ms retry delay; want a doubling backoff", n)
			}
		}},
		{"NoWait", 1, transient, component.NoWait, func(t *testing.T, l *component.Lock, err error, d *downFor) {
			var de *component.DriverError
			if !errors.As(err, &de) || errors.Is(err, component.ErrTimeout) || !strings.Contains(err.Error(), "connection refused") {
				t.Fatalf("Acquire = %v; want the DriverError itself", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &downFor{Driver: memory.New(), failures: tc.failures, err: tc.err}
			m := newMutex(t, component.Options{Driver: d, RetryDelay: time.Millisecond})
			l, err := m.Acquire(context.Background(), "x", component.WithTimeout(tc.timeout))
			tc.check(t, l, err, d)
		})
	}
}

// TestAcquireRidesOutEndsWithCtx: ctx ends a wait on a failing store with
// its cause.
func TestAcquireRidesOutEndsWithCtx(t *testing.T) {
	d := &downFor{Driver: memory.New(), failures: 1 << 30, err: errors.New("connection refused")}
	m := newMutex(t, component.Options{Driver: d, RetryDelay: time.Millisecond})
	stop := errors.New("caller gave up")
	ctx, cancel := context.WithTimeoutCause(context.Background(), 100*time.Millisecond, stop)
	defer cancel()
	if _, err := m.Acquire(ctx, "x", component.WithTimeout(component.Forever)); !errors.Is(err, stop) {
		t.Fatalf("Acquire = %v; want ctx's cause", err)
	}
}
