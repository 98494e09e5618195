// Package fxtest helps the tests of applications that use mutexfx: an
// in-memory store private to each test app, a way to make a held lock lost on
// demand, and assertions on held locks.
//
//	app := fxtest.New(t, mutexfxtest.Module(), fx.Invoke(...))
package fxtest

import (
	"context"
	"testing"
	"time"

	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/v2"
	"go.uber.org/fx"

	"github.com/mutexfx/mutexfx"
	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/memory"
)

// Module replaces mutexfx.Module in an application's tests: memory stores
// named names ("mutex" when none; the first is the default, also provided
// unnamed), all on one fresh *memory.Driver private to the app — also
// provided, for Lose — and a *mutexfx.Registry. TTL 30 s, timeout 10 s as in
// production.
func Module(names ...string) fx.Option {
	if len(names) == 0 {
		names = []string{"mutex"}
	}
	store := memory.New()
	stores := map[string]any{}
	for i, n := range names {
		stores[n] = map[string]any{"driver": map[string]any{"type": "memory"}, "default": i == 0}
	}
	k := koanf.New(".")
	if err := k.Load(confmap.Provider(map[string]any{"mutex": stores}, ""), nil); err != nil {
		return fx.Error(err)
	}
	private := drivers.Factory{
		Type: "memory",
		New:  func(drivers.Spec) (drivers.Driver, error) { return store, nil },
	}
	return fx.Options(
		mutexfx.Module(k, mutexfx.WithDrivers(private)),
		fx.Supply(store),
	)
}

// New returns a Mutex on a private memory store, closed when the test ends.
func New(t testing.TB, opts component.Options) *component.Mutex {
	t.Helper()
	if opts.Driver == nil {
		opts.Driver = memory.New()
	}
	m, err := component.New(opts)
	if err != nil {
		t.Fatalf("fxtest: %v", err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	return m
}

// Lose makes the held lock l lost, as if its store had dropped it, and waits
// (up to 5 s) until the lock's context is cancelled with ErrLost. The lock
// must be held, by l, in m's memory store (Module's or New's): the test
// fails when l was released, lost or expired, or when its name is now held
// by another holder — whose lock Lose leaves alone.
func Lose(t testing.TB, l *component.Lock, m *component.Mutex) {
	t.Helper()
	d, ok := m.Driver().(*memory.Driver)
	if !ok {
		t.Fatalf("fxtest.Lose: store %q is not a memory store", m.Name())
	}
	if !l.Held() {
		t.Fatalf("fxtest.Lose: lock %q is not held (released, lost or expired): %v", l.Name(), l.Err())
	}
	if !d.RevokeToken(l.Key(), l.Token()) {
		t.Fatalf("fxtest.Lose: lock %q is not held by this lock in store %q", l.Name(), m.Name())
	}
	select {
	case <-l.Done():
	case <-time.After(5 * time.Second):
		t.Fatalf("fxtest.Lose: lock %q not lost 5 s after its revocation", l.Name())
	}
}

func names(ls []*component.Lock) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.Name()
	}
	return out
}
