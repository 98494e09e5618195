package mysql

import (
	"errors"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestInterruptedWait: a statement timeout (MariaDB's max_statement_time
// here; MySQL's max_execution_time, KILL QUERY) interrupts a waiter's
// GET_LOCK, which then returns NULL. That is an attempt that did not get
// the lock, and the component waits on until its own timeout. Before, the
// attempt failed, and Acquire with it.
func TestInterruptedWait(t *testing.T) {
	ctx := ctxT(t)
	opts := Options{DSN: testutil.MySQLDSN() + "?max_statement_time=0.2"}
	m1 := newMutex(t, Options{DSN: testutil.MySQLDSN()}, 30*time.Second)
	d2 := openDriver(t, opts)
	m2 := mutexOn(t, d2, 30*time.Second)
	l1, err := m1.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	res, err := d2.Acquire(ctx, drivers.AcquireRequest{Key: l1.Key(), Token: token(), TTL: time.Minute, Wait: 2 * time.Second})
	if took := time.Since(start); err != nil || res.Acquired || took >= time.Second {
		t.Fatalf("Acquire of a held lock, waiting 2s under a 0.2s statement timeout = %+v, %v after %v; want not acquired, interrupted", res, err, took)
	}

	start = time.Now()
	_, err = m2.Acquire(ctx, "job", component.WithTimeout(time.Second))
	var de *component.DriverError
	if !errors.Is(err, component.ErrTimeout) || errors.As(err, &de) {
		t.Fatalf("component Acquire(timeout 1s) = %v after %v; want ErrTimeout after waiting", err, time.Since(start))
	}

	if ok, err := l1.Release(ctx); err != nil || !ok {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	l2, err := m2.Acquire(ctx, "job", component.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatalf("Acquire after the release: %v", err)
	}
	l2.Release(ctx)
}
