package component_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
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
	if l2, err := m.Acquire(ctx, "x", nil, component.WithTimeout(0), nil); l2 != nil || !errors.Is(err, component.ErrTimeout) {
		t.Fatalf("Acquire(nil, WithTimeout(0), nil) of a held lock = %v, %v; want ErrTimeout", l2, err)
	}
	if err := m.Do(ctx, "y", func(context.Context, *component.Lock) error { return nil }, nil); err != nil {
		t.Fatal(err)
	}
	l.Release(ctx)
}
