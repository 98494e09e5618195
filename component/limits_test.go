package component_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/memory"
)

// floored is a memory store declaring a ttl floor, as a networked store does.
type floored struct{ *memory.Driver }

func (f floored) Features() drivers.Features {
	feat := f.Driver.Features()
	feat.MinTTL = 250 * time.Millisecond
	return feat
}

// TestMinTTL: a ttl under the driver's floor is refused by New, WithTTL
// and Extend, naming the floor; the floor itself is served.
func TestMinTTL(t *testing.T) {
	ctx := context.Background()
	d := floored{memory.New()}
	const want = "mutexfx: invalid option TTL: must be at least 250ms for driver \"component_test\": the shortest ttl it can serve"
	if _, err := component.New(component.Options{Driver: d, TTL: 100 * time.Millisecond}); !errors.Is(err, component.ErrInvalidOption) || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("New(TTL 100ms) = %v; want %q…", err, want)
	}
	m := newMutex(t, component.Options{Driver: d})
	if _, err := m.Acquire(ctx, "x", component.WithTTL(100*time.Millisecond)); !strings.HasPrefix(fmtErr(err), want) {
		t.Fatalf("Acquire(WithTTL 100ms) = %v", err)
	}
	if _, err := m.TryAcquire(ctx, "x", component.WithTTL(100*time.Millisecond)); !strings.HasPrefix(fmtErr(err), want) {
		t.Fatalf("TryAcquire(WithTTL 100ms) = %v", err)
	}
	l, err := m.Acquire(ctx, "x", component.WithTTL(250*time.Millisecond))
	if err != nil {
		t.Fatalf("Acquire(WithTTL 250ms) = %v", err)
	}
	if ok, err := l.Extend(ctx, 100*time.Millisecond); ok || !strings.HasPrefix(fmtErr(err), want) {
		t.Fatalf("Extend(100ms) = %v, %v", ok, err)
	}
	if !l.Held() {
		t.Fatal("a refused Extend ended the lock")
	}
}

func fmtErr(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// TestMaxNameLength: names up to MaxNameLength (default 1 KiB) are taken,
// longer ones refused with ErrNameTooLong, saying the limit.
func TestMaxNameLength(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		max, ok int
	}{{0, component.DefaultMaxNameLength}, {16, 16}} {
		m := newMutex(t, component.Options{MaxNameLength: tc.max})
		l, err := m.TryAcquire(ctx, strings.Repeat("n", tc.ok))
		if err != nil || l == nil {
			t.Fatalf("max %d: TryAcquire of %d bytes = %v, %v", tc.max, tc.ok, l, err)
		}
		for name, call := range map[string]func(string) error{
			"Acquire":    func(n string) error { _, err := m.Acquire(ctx, n); return err },
			"TryAcquire": func(n string) error { _, err := m.TryAcquire(ctx, n); return err },
			"Do": func(n string) error {
				return m.Do(ctx, n, func(context.Context, *component.Lock) error { return nil })
			},
		} {
			err := call(strings.Repeat("n", tc.ok+1))
			if !errors.Is(err, component.ErrNameTooLong) || !strings.Contains(err.Error(), "at most") {
				t.Errorf("max %d: %s of %d bytes = %v; want ErrNameTooLong", tc.max, name, tc.ok+1, err)
			}
		}
	}
	if _, err := component.New(component.Options{MaxNameLength: -1}); !errors.Is(err, component.ErrInvalidOption) {
		t.Fatalf("New(MaxNameLength -1) = %v", err)
	}
}
