package drivertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
)

// AcquireFailsAtOnce checks that an Acquire through a component on d (a
// driver whose store refuses it for good: bad credentials, a missing
// permission) waiting up to 5 s fails within a second, with a
// *component.DriverError that matches drivers.ErrPermanent. It returns the
// error for further checks (that it names no password).
func AcquireFailsAtOnce(t testing.TB, d drivers.Driver) error {
	t.Helper()
	m, err := component.New(component.Options{Driver: d, Prefix: "permanent:", TTL: 10 * time.Second})
	if err != nil {
		t.Fatalf("component.New: %v", err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = m.Close(ctx)
	}()
	start := time.Now()
	l, err := m.Acquire(t.Context(), "x", component.WithTimeout(5*time.Second))
	took := time.Since(start)
	switch {
	case err == nil:
		_, _ = l.Release(context.Background())
		t.Fatal("Acquire succeeded; want a permanent store error")
	case !errors.Is(err, drivers.ErrPermanent) || !errors.Is(err, component.ErrDriver) || errors.Is(err, component.ErrTimeout):
		t.Fatalf("Acquire = %v; want an error matching ErrPermanent and ErrDriver, not ErrTimeout", err)
	case took >= time.Second:
		t.Fatalf("Acquire with a 5s timeout failed after %v; want well under a second", took)
	}
	return err
}

// Classified is a case of CheckPermanent: an error of the store, and
// whether the driver must mark it permanent.
type Classified struct {
	// Err is the store's error.
	Err error
	// Permanent says whether the driver must mark Err permanent.
	Permanent bool
}

// CheckPermanent checks a driver's classification of its store's errors:
// permanent(c.Err) matches drivers.ErrPermanent exactly when c.Permanent,
// wraps c.Err and keeps its message; permanent(nil) is nil.
func CheckPermanent(t testing.TB, permanent func(error) error, cases []Classified) {
	t.Helper()
	for _, c := range cases {
		got := permanent(c.Err)
		if errors.Is(got, drivers.ErrPermanent) != c.Permanent || !errors.Is(got, c.Err) || got.Error() != c.Err.Error() {
			t.Errorf("permanent(%q) = %v (permanent %v); want permanent %v, wrapping it, same message",
				c.Err, got, errors.Is(got, drivers.ErrPermanent), c.Permanent)
		}
	}
	if permanent(nil) != nil {
		t.Error("permanent(nil) != nil")
	}
}
