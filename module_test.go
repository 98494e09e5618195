package mutexfx_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/rawbytes"
	"github.com/knadh/koanf/v2"
	"go.uber.org/fx"
	fxt "go.uber.org/fx/fxtest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mutexfx/mutexfx"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/memory"
	"github.com/mutexfx/mutexfx/fxtest"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m, runChild) }

// runChild plays a child role of a test that re-executes the test binary.
func runChild(role string) int {
	switch role {
	case "run-bad-driver":
		// app.Run with a bad driver option: prints the error, exits 1
		k := koanf.New(".")
		if err := k.Load(rawbytes.Provider([]byte(os.Getenv("MUTEXFX_TEST_YAML"))), yaml.Parser()); err != nil {
			return 2
		}
		fx.New(mutexfx.Module(k, allDrivers)).Run()
		return 0
	}
	return 2
}

func yamlConfig(t *testing.T, y string) *koanf.Koanf {
	t.Helper()
	k := koanf.New(".")
	if err := k.Load(rawbytes.Provider([]byte(y)), yaml.Parser()); err != nil {
		t.Fatal(err)
	}
	return k
}

type stores struct {
	fx.In
	Orders  *mutexfx.Mutex `name:"orders"`
	Jobs    *mutexfx.Mutex `name:"jobs"`
	Default *mutexfx.Mutex
	Reg     *mutexfx.Registry
}

func TestModuleProvidesStores(t *testing.T) {
	dir := t.TempDir()
	k := yamlConfig(t, `
mutex:
  orders: {prefix: "orders:", ttl: 2s, timeout: nowait}
  jobs: {driver: {type: file, dir: `+dir+`}, default: true}
`)
	if err := fx.ValidateApp(mutexfx.Module(k), fx.Invoke(func(stores) {}), fx.NopLogger); err != nil {
		t.Fatalf("ValidateApp: %v", err)
	}
	var s stores
	app := fxt.New(t, mutexfx.Module(k), fx.Populate(&s))
	app.RequireStart()

	if s.Default != s.Jobs || s.Orders == s.Jobs || s.Orders.Name() != "orders" || s.Orders.Prefix() != "orders:" {
		t.Fatalf("stores: default %p jobs %p orders %p (%q)", s.Default, s.Jobs, s.Orders, s.Orders.Name())
	}
	if got, err := s.Reg.Get("orders"); got != s.Orders || err != nil {
		t.Fatalf("Registry.Get(orders) = %p, %v", got, err)
	}
	if def, err := s.Reg.Default(); def != s.Jobs || err != nil {
		t.Fatalf("Registry.Default() = %p, %v", def, err)
	}
	if _, err := s.Reg.Get("nope"); !errors.Is(err, mutexfx.ErrStoreNotFound) || !strings.Contains(err.Error(), "jobs, orders") {
		t.Fatalf("Registry.Get(nope) = %v", err)
	}

	ctx := context.Background()
	l, err := s.Orders.Acquire(ctx, "order:42")
	if err != nil {
		t.Fatal(err)
	}
	// timeout: nowait in the config is one attempt.
	start := time.Now()
	if _, err := s.Orders.Acquire(ctx, "order:42"); !errors.Is(err, mutexfx.ErrTimeout) || time.Since(start) > time.Second {
		t.Fatalf("second Acquire with timeout nowait = %v after %v", err, time.Since(start))
	}
	j, err := s.Jobs.Acquire(ctx, "nightly")
	if err != nil {
		t.Fatal(err)
	}
	app.RequireStop()
	for _, l := range []*mutexfx.Lock{l, j} {
		if !errors.Is(l.Err(), mutexfx.ErrClosed) {
			t.Errorf("lock %q after stop: %v; want released by the stop (ErrClosed)", l.Name(), l.Err())
		}
	}
	in := s.Orders.Driver().(drivers.Inspector)
	if _, held, _ := in.Inspect(ctx, l.Key()); held {
		t.Fatal("memory lock still held in the store after stop")
	}
}

func TestModuleNothingConfigured(t *testing.T) {
	var m *mutexfx.Mutex
	app := fxt.New(t, mutexfx.Module(koanf.New(".")), fx.Populate(&m))
	app.RequireStart()
	if m == nil || m.Name() != "mutex" || m.Features().Scope != "process" {
		t.Fatalf("default store = %v", m)
	}
	app.RequireStop()
}

func TestModuleErrors(t *testing.T) {
	cases := []struct {
		yaml  string
		want  string
		is    error
		extra []fx.Option
	}{
		{yaml: "mutex:\n  orders: {ttl: 5}\n", want: "mutex.orders.ttl: must be at least 10ms"},
		{yaml: "mutex:\n  orders: {application: orders/api}\n", want: "mutex.orders.application: byte 6 ('/') not allowed"},
		{yaml: "mutex:\n  orders: {driver: {type: redis}}\n", is: mutexfx.ErrDriverNotFound,
			want: `mutex.orders.driver.type: mutexfx: driver not found: driver "redis" is not linked into this binary: import "github.com/mutexfx/mutexfx/drivers/redis"`},
		{yaml: "mutex:\n  orders: {driver: {type: carrier-pigeon}}\n", is: mutexfx.ErrDriverNotFound,
			want: `mutex.orders.driver.type: mutexfx: driver not found: unknown driver type "carrier-pigeon"`},
		{yaml: "mutex:\n  orders: {driver: {type: memory, size: 3}}\n", want: "mutex.orders.driver.size: unknown key"},
		{yaml: "mutex:\n  orders: {driver: {type: file}}\n", want: "mutex.orders.driver.dir"},
		{yaml: "mutex:\n  orders: {driver: {type: memory, client: cache}}\n", want: `mutex.orders.driver.client: driver "memory" cannot use an existing client`},
	}
	for _, c := range cases {
		app := fx.New(append([]fx.Option{mutexfx.Module(yamlConfig(t, c.yaml)), fx.Invoke(func(*mutexfx.Registry) {}), fx.NopLogger}, c.extra...)...)
		err := app.Err()
		if err == nil || !strings.Contains(err.Error(), c.want) || (c.is != nil && !errors.Is(err, c.is)) {
			t.Errorf("%q: fx.New error %v; want %q", c.yaml, err, c.want)
		}
	}
}

// TestModuleDriverOptionErrors: a bad driver option fails fx.New with the
// driver's error itself — its text begins with the key path and the
// reason, with none of fx's wrapping — and app.Run prints it once.
func TestModuleDriverOptionErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"mutex:\n  orders: {driver: {type: file}}\n", "mutex.orders.driver.dir: required"},
		{"mutex:\n  orders: {driver: {type: redis, url: \"http://x\"}}\n", "mutex.orders.driver.url: "},
		{"mutex:\n  orders: {driver: {type: postgres, mode: rows}}\n", `mutex.orders.driver.mode: must be "advisory" or "table", not "rows"`},
		{"mutex:\n  orders: {driver: {type: mysql, port: -1}}\n", "mutex.orders.driver.port: "},
	} {
		err := fx.New(mutexfx.Module(yamlConfig(t, tc.yaml), allDrivers), fx.NopLogger).Err()
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "reflect") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: fx.New error %q; want it to begin with %q, on one line", tc.yaml, err, tc.want)
		}
	}
	const y = "mutex:\n  orders: {driver: {type: file}}\n"
	if err := fx.New(mutexfx.Module(yamlConfig(t, y)), fx.NopLogger).Err(); err == nil || err.Error() != "mutex.orders.driver.dir: required" {
		t.Fatalf("fx.New error %q; want exactly %q", err, "mutex.orders.driver.dir: required")
	}
	cmd := testutil.Child(t, "run-bad-driver", "MUTEXFX_TEST_YAML="+y)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err == nil {
		t.Fatalf("app.Run succeeded; output:\n%s", out.String())
	}
	// fx logs a failed fx.Invoke, then app.Run its failure to start: the
	// error twice, and no other.
	if n, errs := strings.Count(out.String(), "mutex.orders.driver.dir: required"), strings.Count(out.String(), "ERROR"); n != 2 || errs != 2 || strings.Contains(out.String(), "reflect") {
		t.Fatalf("app.Run printed the error %d times in %d errors; want it as the only error, without reflection frames:\n%s", n, errs, out.String())
	}
}

// TestModuleValidatesEveryStore: a store nobody injects is validated too:
// its invalid driver block fails fx.New.
func TestModuleValidatesEveryStore(t *testing.T) {
	k := yamlConfig(t, "mutex:\n  mutex: {driver: memory}\n  jobs:\n    driver: {type: file, adress: /tmp/x}\n")
	app := fx.New(mutexfx.Module(k), fx.NopLogger, fx.Invoke(func(*mutexfx.Mutex) {}))
	if err := app.Err(); err == nil || !strings.Contains(err.Error(), "mutex.jobs.driver") {
		t.Fatalf("fx.New with an invalid store nobody injects: %v; want an error naming mutex.jobs.driver", err)
	}
}

// countingDriver counts the calls reaching its store.
type countingDriver struct {
	drivers.Driver
	calls, closes atomic.Int32
}

func (d *countingDriver) Acquire(ctx context.Context, r drivers.AcquireRequest) (drivers.AcquireResult, error) {
	d.calls.Add(1)
	return d.Driver.Acquire(ctx, r)
}

func (d *countingDriver) Close(ctx context.Context) error {
	d.closes.Add(1)
	return d.Driver.Close(ctx)
}

func TestModuleExistingClient(t *testing.T) {
	// A driver type built on a client from the application's graph: here the
	// "client" is a memory store, as a Redis client or a pgx pool would be.
	var built *countingDriver
	var gotClient any
	f := drivers.Factory{
		Type:       "shared",
		ClientType: reflect.TypeFor[*memory.Driver](),
		New: func(spec drivers.Spec) (drivers.Driver, error) {
			gotClient = spec.Client
			built = &countingDriver{Driver: spec.Client.(*memory.Driver)}
			return built, nil
		},
	}
	client := memory.New()
	k := yamlConfig(t, "mutex:\n  locks: {driver: {type: shared, client: appStore}}\n")
	var m *mutexfx.Mutex
	app := fxt.New(t,
		fx.Supply(fx.Annotate(client, fx.ResultTags(`name:"appStore"`))),
		mutexfx.Module(k, mutexfx.WithDrivers(f)),
		fx.Populate(&m),
	)
	app.RequireStart()
	if gotClient != client {
		t.Fatalf("driver got client %v; want the graph's", gotClient)
	}
	if built.calls.Load() != 0 {
		t.Fatalf("the store was called %d times at start; nothing connects before the first acquisition", built.calls.Load())
	}
	l, err := m.Acquire(context.Background(), "x")
	if err != nil || built.calls.Load() != 1 {
		t.Fatalf("Acquire = %v, %v after %d calls", l, err, built.calls.Load())
	}
	app.RequireStop()
	if built.closes.Load() != 1 {
		t.Fatalf("driver closed %d times at stop", built.closes.Load())
	}

	// Missing client in the graph: a config error at the key path names
	// it; fx.ValidateApp reports it too.
	err = fx.New(mutexfx.Module(k, mutexfx.WithDrivers(f)), fx.Invoke(func(*mutexfx.Mutex) {}), fx.NopLogger).Err()
	if err == nil || !strings.Contains(err.Error(), `mutex.locks.driver.client: no *memory.Driver named "appStore" in the fx graph`) {
		t.Fatalf("missing client: %v", err)
	}
	err = fx.ValidateApp(mutexfx.Module(k, mutexfx.WithDrivers(f)), fx.Invoke(func(*mutexfx.Mutex) {}), fx.NopLogger)
	if err == nil || !strings.Contains(err.Error(), `missing type: *memory.Driver[name="appStore"]`) {
		t.Fatalf("ValidateApp, missing client: %v", err)
	}
}

func TestModuleLogsLostLocks(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	var m *mutexfx.Mutex
	app := fxt.New(t, fxtest.Module("orders"), fx.Supply(zap.New(core)), fx.Populate(&m))
	app.RequireStart()
	defer app.RequireStop()
	l, err := m.Acquire(context.Background(), "order:7")
	if err != nil {
		t.Fatal(err)
	}
	fxtest.Lose(t, l, m)
	if !errors.Is(l.Err(), mutexfx.ErrLost) {
		t.Fatalf("cause %v; want ErrLost", l.Err())
	}
	entries := logs.FilterMessage("mutex lock lost").All()
	if len(entries) != 1 || entries[0].ContextMap()["store"] != "orders" || entries[0].ContextMap()["lock"] != "order:7" {
		t.Fatalf("log entries %+v", entries)
	}
}

func TestOpenWithoutFx(t *testing.T) {
	reg, err := mutexfx.Open(yamlConfig(t, "locks:\n  a: {}\n  b: {ttl: 1s}\n"), mutexfx.WithPath("locks"))
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(context.Background())
	a, err := reg.Get("a")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Do(context.Background(), "x", func(ctx context.Context, l *mutexfx.Lock) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Default(); !errors.Is(err, mutexfx.ErrStoreNotFound) {
		t.Fatalf("Default() with two stores, none marked: %v", err)
	}
	if _, err := mutexfx.Open(yamlConfig(t, "mutex:\n  a: {driver: redis}\n")); !errors.Is(err, mutexfx.ErrDriverNotFound) {
		t.Fatalf("Open with an unlinked driver: %v", err)
	}
}
