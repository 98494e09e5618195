package mutexfx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/knadh/koanf/v2"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/config"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/file"
	"github.com/mutexfx/mutexfx/drivers/memory"
	"github.com/mutexfx/mutexfx/internal/redact"
	"github.com/mutexfx/mutexfx/lifecycle"
)

// ErrStoreNotFound reports a store name that is not configured.
var ErrStoreNotFound = errors.New("mutexfx: store not found")

// Registry holds the configured stores by name.
type Registry struct {
	stores map[string]*Mutex
	def    string
	log    *zap.Logger // Close's warnings; nil: none
}

// NewRegistry returns a registry of stores; def names the default store
// ("" for none).
func NewRegistry(stores map[string]*Mutex, def string) *Registry {
	return &Registry{stores: maps.Clone(stores), def: def}
}

// Get returns the store name, or an error wrapping ErrStoreNotFound that
// lists the configured stores.
func (r *Registry) Get(name string) (*Mutex, error) {
	if m, ok := r.stores[name]; ok {
		return m, nil
	}
	return nil, fmt.Errorf("%w: %q (configured: %s)", ErrStoreNotFound, name, strings.Join(r.Names(), ", "))
}

// Default returns the default store, or an error wrapping ErrStoreNotFound
// when none is configured.
func (r *Registry) Default() (*Mutex, error) {
	if r.def == "" {
		return nil, fmt.Errorf("%w: no default store (mark one with default: true)", ErrStoreNotFound)
	}
	return r.Get(r.def)
}

// Names returns the store names, sorted.
func (r *Registry) Names() []string {
	return slices.Sorted(maps.Keys(r.stores))
}

// Close closes every store concurrently, each bounded by ctx (see
// Mutex.Close): a store stuck on a dead link delays no other's release. It
// returns their errors joined.
func (r *Registry) Close(ctx context.Context) error {
	stores := make(map[string]lifecycle.Closer, len(r.stores))
	for name, m := range r.stores {
		stores[name] = m
	}
	return lifecycle.CloseAll(ctx, r.log, stores)
}

// Open builds every store configured in k without fx: for applications that
// use koanf but not fx. Stores whose driver names an existing client
// (driver.client) cannot be built here: use NewStore with the client. Close
// the Registry when done.
func Open(k *koanf.Koanf, opts ...Option) (*Registry, error) {
	o := newModuleOptions(opts)
	cfg, err := config.Load(k, o.path)
	if err != nil {
		return nil, err
	}
	stores := map[string]*Mutex{}
	for _, st := range cfg.Stores {
		m, err := newStore(st, o.factory(st.Driver.Type), o.logger, nil, o.telemetry)
		if err != nil {
			for _, m := range stores {
				_ = m.Close(context.Background())
			}
			return nil, err
		}
		stores[st.Name] = m
	}
	r := NewRegistry(stores, cfg.Default)
	r.log = o.logger
	return r, nil
}

// NewStore builds the Mutex of one configured store with its driver's
// factory (nil when the type is not linked: the error then names the
// package to import), a logger (nil: none) and, for driver.client, the
// application's client. It connects nothing.
func NewStore(st config.Store, f *drivers.Factory, log *zap.Logger, client any) (*Mutex, error) {
	return newStore(st, f, log, client, telemetryOptions{})
}

// telemetryOptions are the OpenTelemetry providers of the stores; nil:
// the global ones.
type telemetryOptions struct {
	meters  metric.MeterProvider
	tracers trace.TracerProvider
}

var (
	meterProviderType  = reflect.TypeFor[metric.MeterProvider]()
	tracerProviderType = reflect.TypeFor[trace.TracerProvider]()
)

func newStore(st config.Store, f *drivers.Factory, log *zap.Logger, client any, tel telemetryOptions) (*Mutex, error) {
	if f == nil {
		return nil, notFound(st.Driver)
	}
	if log == nil {
		log = zap.NewNop()
	}
	if st.Driver.Client != "" && isNil(client) {
		return nil, config.Errorf(config.Join(st.Driver.Path, "client"), "client %q not given", st.Driver.Client)
	}
	drv, err := f.New(drivers.Spec{
		Path:    st.Driver.Path,
		Options: st.Driver.Options,
		Client:  client,
		Logger:  log.With(zap.String("store", st.Name)),
	})
	if err != nil {
		return nil, err
	}
	if err := checkMinTTL(st, drv); err != nil {
		_ = drv.Close(context.Background())
		return nil, err
	}
	return component.New(component.Options{
		Driver:         drv,
		Name:           st.Name,
		Prefix:         st.Prefix,
		TTL:            st.TTL,
		Timeout:        st.Timeout,
		RetryDelay:     st.RetryDelay,
		MaxNameLength:  st.MaxNameLength,
		Application:    st.Application,
		TraceAll:       st.TraceAll,
		Logger:         log,
		DriverType:     st.Driver.Type,
		MeterProvider:  tel.meters,
		TracerProvider: tel.tracers,
	})
}

func notFound(d config.Driver) error {
	pkg := drivers.PackageOf(d.Type)
	if s := drivers.Suggest(d.Type); pkg == "" && s != "" {
		// "Redis", "mariadb": a hint, not a match (types are matched exactly)
		where := "built in"
		if s != "memory" && s != "file" {
			where = fmt.Sprintf("package %q: import it and pass %s.Factory() to mutexfx.WithDrivers", drivers.PackageOf(s), s)
		}
		return fmt.Errorf("%s: %w: unknown driver type %q: did you mean %q? (%s)", config.Join(d.Path, "type"), drivers.ErrDriverNotFound, d.Type, s, where)
	}
	if pkg == "" {
		return fmt.Errorf("%s: %w: unknown driver type %q (mutexfx ships %s)", config.Join(d.Path, "type"), drivers.ErrDriverNotFound, d.Type, drivers.Shipped())
	}
	return fmt.Errorf("%s: %w: driver %q is not linked into this binary: import %q and pass its Factory() to mutexfx.WithDrivers",
		config.Join(d.Path, "type"), drivers.ErrDriverNotFound, d.Type, pkg)
}

// Option configures Module and Open.
type Option func(*moduleOptions)

type moduleOptions struct {
	path      string
	factories map[string]drivers.Factory
	logger    *zap.Logger
	telemetry telemetryOptions
}

func newModuleOptions(opts []Option) moduleOptions {
	o := moduleOptions{path: config.DefaultPath, factories: map[string]drivers.Factory{}}
	for _, f := range []drivers.Factory{memory.Factory(), file.Factory()} {
		o.factories[f.Type] = f
	}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

func (o moduleOptions) factory(typ string) *drivers.Factory {
	if f, ok := o.factories[typ]; ok {
		return &f
	}
	return nil
}

// WithPath reads the stores under path instead of "mutex".
func WithPath(path string) Option {
	return func(o *moduleOptions) { o.path = path }
}

// WithDrivers links driver types beyond the built-in memory and file ones,
// for example WithDrivers(redis.Factory()).
func WithDrivers(factories ...drivers.Factory) Option {
	return func(o *moduleOptions) {
		for _, f := range factories {
			o.factories[f.Type] = f
		}
	}
}

// WithLogger sets the logger of Open (Module takes the application's
// *zap.Logger from the fx graph when there is one).
func WithLogger(log *zap.Logger) Option {
	return func(o *moduleOptions) { o.logger = log }
}

// WithMeterProvider sets the OpenTelemetry meter provider of Open's stores
// (Module takes a metric.MeterProvider from the fx graph when there is
// one). Default: the global one.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *moduleOptions) { o.telemetry.meters = mp }
}

// WithTracerProvider sets the OpenTelemetry tracer provider of Open's
// stores (Module takes a trace.TracerProvider from the fx graph when there
// is one). Default: the global one.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *moduleOptions) { o.telemetry.tracers = tp }
}

var loggerType = reflect.TypeFor[*zap.Logger]()

// isNil reports whether v is nil, or a nil pointer, map, slice, channel,
// func or interface in an interface (an optional fx parameter that nobody
// provides).
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Chan, reflect.Func, reflect.Interface:
		return rv.IsNil()
	}
	return false
}

// registryView is what a Registry prints: its stores as Mutex prints them.
type registryView struct {
	Stores  []*Mutex `json:"stores"`
	Default string   `json:"default,omitempty"`
}

func (r *Registry) view() registryView {
	if r == nil {
		return registryView{}
	}
	v := registryView{Default: r.def}
	for _, name := range r.Names() {
		v.Stores = append(v.Stores, r.stores[name])
	}
	return v
}

// String describes the registry: its stores (name, prefix, driver type)
// and default, never a driver's options.
func (r *Registry) String() string { return fmt.Sprintf("mutexfx.Registry%+v", r.view()) }

// GoString is String in Go syntax, for %#v.
func (r *Registry) GoString() string { return redact.GoString("mutexfx.Registry", r.view()) }

// Format prints the registry as String does (GoString for %#v).
func (r *Registry) Format(f fmt.State, verb rune) { redact.Format(f, verb, r.String, r.GoString) }

// MarshalJSON encodes the registry's stores and default.
func (r *Registry) MarshalJSON() ([]byte, error) { return json.Marshal(r.view()) }
