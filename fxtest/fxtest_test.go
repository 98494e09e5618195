package fxtest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/v2"
	"go.uber.org/fx"
	fxt "go.uber.org/fx/fxtest"
	"go.uber.org/goleak"

	"github.com/mutexfx/mutexfx"
	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers/memory"
	"github.com/mutexfx/mutexfx/fxtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type deps struct {
	fx.In
	Default *mutexfx.Mutex
	Orders  *mutexfx.Mutex `name:"orders"`
	Jobs    *mutexfx.Mutex `name:"jobs"`
	Store   *memory.Driver
}

func TestModule(t *testing.T) {
	var d deps
	app := fxt.New(t, fxtest.Module("orders", "jobs"), fx.Populate(&d))
	if err := fx.ValidateApp(fxtest.Module("orders", "jobs"), fx.Invoke(func(deps) {}), fx.NopLogger); err != nil {
		t.Fatal(err)
	}
	app.RequireStart()
	defer app.RequireStop()
	if d.Default != d.Orders || d.Jobs == d.Orders {
		t.Fatal("the first store is the default")
	}
	ctx := context.Background()
	l, err := d.Orders.Acquire(ctx, "order:1")
	if err != nil {
		t.Fatal(err)
	}
	if got := fxtest.RequireHeld(t, d.Orders, "order:1"); got != l {
		t.Fatalf("RequireHeld = %v", got)
	}
	fxtest.RequireNotHeld(t, d.Jobs, "order:1")
	fxtest.Lose(t, l, d.Orders)
	if !errors.Is(l.Err(), mutexfx.ErrLost) {
		t.Fatalf("after Lose: %v", l.Err())
	}
	fxtest.RequireNotHeld(t, d.Orders, "order:1")
	fxtest.RequireFree(t, d.Orders, "order:1")
}

// Two test apps do not share locks: each Module has its own store.
func TestModulesArePrivate(t *testing.T) {
	var a, b *mutexfx.Mutex
	appA := fxt.New(t, fxtest.Module(), fx.Populate(&a))
	appB := fxt.New(t, fxtest.Module(), fx.Populate(&b))
	appA.RequireStart()
	appB.RequireStart()
	defer appA.RequireStop()
	defer appB.RequireStop()
	ctx := context.Background()
	if _, err := a.Acquire(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if l, err := b.TryAcquire(ctx, "x"); l == nil || err != nil {
		t.Fatalf("second app's store shares the first's locks: %v, %v", l, err)
	}
}

// TestModuleStoresShareLikeProduction: in production, stores on the same
// backend with the default prefix ("mutex:") share their locks, as every
// memory store does (one process-wide driver): a name held in store "a" is
// held in store "b". fxtest.Module's stores, on one driver with the default
// prefix, do the same, so an app's test sees the contention production
// has.
func TestModuleStoresShareLikeProduction(t *testing.T) {
	k := koanf.New(".")
	if err := k.Load(confmap.Provider(map[string]any{"mutex": map[string]any{
		"a": map[string]any{"driver": "memory", "default": true},
		"b": map[string]any{"driver": "memory"},
	}}, ""), nil); err != nil {
		t.Fatal(err)
	}
	shared := func(module fx.Option) bool {
		var r *mutexfx.Registry
		app := fxt.New(t, module, fx.Populate(&r), fx.NopLogger)
		app.RequireStart()
		defer app.RequireStop()
		a, errA := r.Get("a")
		b, errB := r.Get("b")
		if err := errors.Join(errA, errB); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if _, err := a.TryAcquire(ctx, "fxtest-shared"); err != nil {
			t.Fatal(err)
		}
		_, err := b.TryAcquire(ctx, "fxtest-shared")
		if err != nil && !errors.Is(err, mutexfx.ErrLocked) {
			t.Fatal(err)
		}
		return err != nil
	}
	prod, test := shared(mutexfx.Module(k)), shared(fxtest.Module("a", "b"))
	if !prod || test != prod {
		t.Fatalf("a name held in store a is held in store b: production %v, fxtest %v; want true for both", prod, test)
	}
}

func TestNew(t *testing.T) {
	m := fxtest.New(t, component.Options{Name: "unit"})
	l, err := m.Acquire(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	fxtest.Lose(t, l, m)
	fxtest.RequireFree(t, m, "x")
}

// fatalT records the first Fatalf of the helper it is given and ends the
// helper's goroutine there, as testing.T does.
type fatalT struct {
	testing.TB
	msg string
}

func (f *fatalT) Helper() {}

func (f *fatalT) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// fatal runs fn with a fatalT in its own goroutine and returns its Fatalf
// message, "" when fn returned without one.
func fatal(t *testing.T, fn func(testing.TB)) string {
	f := &fatalT{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f.msg
}

// TestLoseNotHeld: Lose of a lock that is no longer held fails the test,
// and never drops the lock of the name's new holder.
func TestLoseNotHeld(t *testing.T) {
	ctx := context.Background()
	drv := memory.New()
	m := fxtest.New(t, component.Options{Driver: drv, Name: "a"})
	other := fxtest.New(t, component.Options{Driver: drv, Name: "b"})
	l, err := m.Acquire(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if msg := fatal(t, func(tb testing.TB) { fxtest.Lose(tb, l, m) }); !strings.Contains(msg, "not held") {
		t.Errorf("Lose of a released lock, name free: failure %q, want \"not held\"", msg)
	}
	l2, err := other.Acquire(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if msg := fatal(t, func(tb testing.TB) { fxtest.Lose(tb, l, m) }); !strings.Contains(msg, "not held") {
		t.Errorf("Lose of a released lock, name held by another: failure %q, want \"not held\"", msg)
	}
	if !l2.Held() {
		t.Fatalf("the other holder's lock ended: %v", l2.Err())
	}
	fxtest.RequireHeld(t, other, "x")
	if info, held, err := drv.Inspect(ctx, l2.Key()); err != nil || !held || info.Token != l2.Token() {
		t.Fatalf("store: %+v, held %v, %v; want held by the other holder", info, held, err)
	}
	if msg := fatal(t, func(tb testing.TB) { fxtest.Lose(tb, l2, other) }); msg != "" {
		t.Fatalf("Lose of a held lock failed: %s", msg)
	}
	if !errors.Is(l2.Err(), mutexfx.ErrLost) {
		t.Fatalf("after Lose: %v", l2.Err())
	}
}
