// Package mutexfx gives a piece of work to one holder at a time — between
// goroutines, the processes of a host, or every instance of a service — as
// an fx module configured with koanf.
//
//	fx.New(
//		mutexfx.Module(k), // one *mutexfx.Mutex per store under "mutex"
//		fx.Invoke(func(m *mutexfx.Mutex) { ... }),
//	)
//
// The lock component itself is package component (usable without fx), the
// stores are in drivers/..., the configuration in config.
package mutexfx

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/knadh/koanf/v2"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/config"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/lifecycle"
)

// storesGroup is the private value group of the built stores.
const storesGroup = `group:"mutexfx.stores"`

// store is one built store, for the Registry.
type store struct {
	name string
	m    *Mutex
}

// Module builds the fx options of the stores configured in k (under
// "mutex", or WithPath): one *Mutex per store, named by its key
// (`name:"orders"`); the default store (marked default: true, else the
// store named "mutex", else the only store) also unnamed; and a *Registry.
// Nothing configured gives one memory store named "mutex".
//
// The configuration is read now, so invalid configuration fails fx.New with
// an error naming the key path. Stores connect at their first acquisition;
// on stop they release their locks and close within the stop deadline. The
// application's *zap.Logger is used when the graph has one, and so are its
// OpenTelemetry metric.MeterProvider and trace.TracerProvider (else the
// global ones: see docs/telemetry.md).
func Module(k *koanf.Koanf, opts ...Option) fx.Option {
	o := newModuleOptions(opts)
	cfg, err := config.Load(k, o.path)
	if err != nil {
		return failed(err)
	}
	options := []fx.Option{
		fx.Supply(cfg, fx.Private),
		// One stop hook closes every store, concurrently (lifecycle.Group);
		// it is built with the first store, so runs after the hooks of
		// everything built on the stores.
		fx.Provide(fx.Private, fx.Annotate(lifecycle.NewGroup, fx.ParamTags(``, `optional:"true"`))),
		fx.Provide(fx.Annotate(newRegistry, fx.ParamTags(``, storesGroup))),
		// Build every store when the graph is built, injected or not: a
		// driver block is validated as its driver is built (which
		// connects nothing), and invalid configuration must fail fx.New.
		fx.Invoke(func(*Registry) {}),
	}
	var checks []fx.Option
	for _, st := range cfg.Stores {
		f := o.factory(st.Driver.Type)
		if f == nil {
			return failed(notFound(st.Driver))
		}
		if st.Driver.Client != "" && f.ClientType != nil {
			checks = append(checks, clientCheck(st, f))
		}
		if err := checkDriver(st, f); err != nil {
			// here, not from the store's constructor: fx would bury the
			// error under its own wrapping, and app.Run print it twice
			return failed(err)
		}
		ctor, tags, err := storeConstructor(st, f)
		if err != nil {
			return failed(err)
		}
		options = append(options, fx.Provide(fx.Annotate(ctor,
			fx.ParamTags(tags...),
			fx.ResultTags(fmt.Sprintf(`name:%q`, st.Name), storesGroup))))
		if st.Name == cfg.Default {
			options = append(options, fx.Provide(fx.Annotate(
				func(m *Mutex) *Mutex { return m },
				fx.ParamTags(fmt.Sprintf(`name:%q`, st.Name)))))
		}
	}
	// after the Invoke that builds the stores: see clientCheck
	options = append(options, checks...)
	return fx.Module("mutexfx", options...)
}

// failed is the module of an invalid configuration: err is the first and
// only error of fx.New. Not fx.Error: with it, fx provides nothing, so an
// application's fx.WithLogger needing its *zap.Logger fails too, and fx
// prints that "missing type: *zap.Logger" before err. An Invoke runs once
// the graph (and the custom logger) is built, and its error is returned
// as is. fx.ValidateApp, which calls no function, does not see err.
func failed(err error) fx.Option {
	return fx.Module("mutexfx", fx.Invoke(func() error { return err }))
}

func newRegistry(cfg config.Config, stores []store) *Registry {
	m := make(map[string]*Mutex, len(stores))
	for _, s := range stores {
		m[s.name] = s.m
	}
	return NewRegistry(m, cfg.Default)
}

// storeConstructor builds the fx constructor of one store:
//
//	func(*lifecycle.Group, *zap.Logger [optional], metric.MeterProvider [optional],
//		trace.TracerProvider [optional], client [named, when configured]) (*Mutex, store, error)
//
// The client's type is only known from the driver's factory, hence reflect.
func storeConstructor(st config.Store, f *drivers.Factory) (any, []string, error) {
	in := []reflect.Type{reflect.TypeFor[*lifecycle.Group](), loggerType, meterProviderType, tracerProviderType}
	tags := []string{``, `optional:"true"`, `optional:"true"`, `optional:"true"`}
	if st.Driver.Client != "" {
		if f.ClientType == nil {
			return nil, nil, config.Errorf(config.Join(st.Driver.Path, "client"), "driver %q cannot use an existing client", st.Driver.Type)
		}
		// optional, so that a client missing from the graph is reported
		// by the store's constructor at the key path (clientMissing), not
		// by fx as a bare missing type
		in = append(in, f.ClientType)
		tags = append(tags, fmt.Sprintf(`name:%q optional:"true"`, st.Driver.Client))
	}
	out := []reflect.Type{reflect.TypeFor[*Mutex](), reflect.TypeFor[store](), reflect.TypeFor[error]()}
	fn := reflect.MakeFunc(reflect.FuncOf(in, out, false), func(args []reflect.Value) []reflect.Value {
		g := args[0].Interface().(*lifecycle.Group)
		log, _ := args[1].Interface().(*zap.Logger)
		tel := telemetryOptions{}
		tel.meters, _ = args[2].Interface().(metric.MeterProvider)
		tel.tracers, _ = args[3].Interface().(trace.TracerProvider)
		var client any
		if len(args) > 4 {
			client = args[4].Interface()
		}
		var m *Mutex
		var err error
		if st.Driver.Client != "" && isNil(client) {
			err = clientMissing(st, f)
		} else {
			m, err = newFxStore(g, st, f, log, client, tel)
		}
		errv := reflect.Zero(out[2])
		if err != nil {
			errv = reflect.ValueOf(&err).Elem()
		}
		return []reflect.Value{reflect.ValueOf(m), reflect.ValueOf(store{name: st.Name, m: m}), errv}
	})
	return fn.Interface(), tags, nil
}

// newFxStore builds a store and ties it to the application's lifecycle.
func newFxStore(g *lifecycle.Group, st config.Store, f *drivers.Factory, log *zap.Logger, client any, tel telemetryOptions) (*Mutex, error) {
	m, err := newStore(st, f, log, client, tel)
	if err != nil {
		return nil, err
	}
	g.Add(st.Name, m)
	return m, nil
}

// clientMissing is the error of a driver.client naming a client the fx graph
// does not have.
func clientMissing(st config.Store, f *drivers.Factory) error {
	as := ""
	if f.ClientType.Kind() == reflect.Interface {
		as = fmt.Sprintf("fx.As(new(%s)), ", f.ClientType)
	}
	return config.Errorf(config.Join(st.Driver.Path, "client"), "no %s named %q in the fx graph (provide one with "+
		"fx.Annotate(client, %sfx.ResultTags(`name:%q`)))", f.ClientType, st.Driver.Client, as, st.Driver.Client)
}

// clientCheck requires the client named by a store's driver.client. The
// store's constructor takes it as optional, to report a missing one at the
// key path when fx.New builds the stores (which happens first, in the
// Invoke before this one); fx.ValidateApp calls no constructor, and this
// makes it report the missing client too.
func clientCheck(st config.Store, f *drivers.Factory) fx.Option {
	fn := reflect.MakeFunc(reflect.FuncOf([]reflect.Type{f.ClientType}, nil, false), func([]reflect.Value) []reflect.Value { return nil })
	return fx.Invoke(fx.Annotate(fn.Interface(), fx.ParamTags(fmt.Sprintf(`name:%q`, st.Driver.Client))))
}

// checkDriver validates a store's driver block now, by building its driver
// (which connects nothing) and closing it unused, so that a bad driver
// option fails fx.New with the driver's own error, which names the key
// path. A block naming a client is checked when the store is built, with
// the client.
func checkDriver(st config.Store, f *drivers.Factory) error {
	if st.Driver.Client != "" {
		return nil
	}
	d, err := f.New(drivers.Spec{Path: st.Driver.Path, Options: st.Driver.Options, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	err = checkMinTTL(st, d)
	return errors.Join(err, d.Close(context.Background()))
}

// checkMinTTL refuses a store's ttl shorter than its driver's floor
// (drivers.Features.MinTTL), at the ttl's key path: the component's own
// check (component.Options.Validate) of a ttl with that driver.
func checkMinTTL(st config.Store, d drivers.Driver) error {
	return config.OptionError(st.Path, component.Options{Driver: d, DriverType: st.Driver.Type, TTL: st.TTL}.Validate())
}
