// Package config reads and validates mutexfx's koanf configuration: a block
// per store under one key (mutex by default), keys mirroring the component's
// options.
//
//	mutex:
//	  orders:
//	    driver: {type: redis, url: "redis://127.0.0.1:6379"}
//	    prefix: "orders:"
//	    ttl: 30s          # Go duration, or integer milliseconds
//	    timeout: 10s      # nowait: one attempt; -1 or "infinite": no limit
//	    retryDelay: 50ms
//	    maxNameLength: 1024 # bytes of a lock name (default 1 KiB)
//	    default: true     # also provided unnamed
//	    application: orders-api # holder identity (default: the binary's name)
//	    traceAll: false   # a span for every acquisition, not only traced ones
//
// Every error names the full key path ("mutex.orders.ttl: must be at least
// 10ms"); unknown keys are errors.
package config

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/knadh/koanf/v2"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
)

// DefaultPath is the key under which stores are configured.
const DefaultPath = "mutex"

// DefaultStore is the name of the store used when nothing is configured, and
// the default store's name when no store says default: true.
const DefaultStore = "mutex"

// NoWait is the Timeout of a store configured with timeout: nowait (one
// attempt): component.NoWait.
const NoWait = component.NoWait

// Config is the parsed configuration of every store.
type Config struct {
	// Stores, sorted by name.
	Stores []Store
	// Default is the name of the store also provided unnamed: the one
	// marked default: true, else the store named "mutex", else the only
	// store — unless that store says default: false. "" when there is none.
	Default string
}

// Store is one store's configuration. Zero durations mean the component's
// defaults.
type Store struct {
	// Name is the store's key ("orders").
	Name string
	// Path is its key path ("mutex.orders"), for errors.
	Path       string
	Driver     Driver
	Prefix     string
	TTL        time.Duration
	Timeout    time.Duration // NoWait for "nowait", Forever for no limit, 0 when unset
	RetryDelay time.Duration
	// MaxNameLength is the longest lock name in bytes; 0 when unset (the
	// component's default, 1 KiB).
	MaxNameLength int
	Default       bool
	// Application names the program in the holder identity of its locks
	// (component.Options.Application); "" when unset (the binary's name).
	Application string
	// TraceAll makes a span for every acquisition
	// (component.Options.TraceAll).
	TraceAll bool

	// defaultSet: the block has a default key; a store saying default:
	// false is never the default by its name or by being the only store.
	defaultSet bool
}

// Driver is a store's driver block.
type Driver struct {
	// Type is the driver type ("memory", "file", "redis", …). A store
	// without a driver block is a memory store; an empty type, or driver
	// options without a type, are errors.
	Type string
	// Client names a client the application already has in its fx graph,
	// for drivers that can use one; empty otherwise.
	Client string
	// Options are the block's other keys, decoded by the driver.
	Options map[string]any
	// Path is the block's key path ("mutex.orders.driver").
	Path string
}

// Load reads the stores under path (DefaultPath when empty) of k. Nothing
// configured gives one memory store named DefaultStore.
func Load(k *koanf.Koanf, path string) (Config, error) {
	if path == "" {
		path = DefaultPath
	}
	var raw any
	if k != nil {
		raw = k.Get(path)
	}
	if raw == nil {
		st := Store{Name: DefaultStore, Path: Join(path, DefaultStore), Driver: Driver{Type: "memory", Path: Join(path, DefaultStore+".driver")}}
		return Config{Stores: []Store{st}, Default: DefaultStore}, nil
	}
	block, ok := raw.(map[string]any)
	if !ok {
		return Config{}, Errorf(path, "must be a map of stores, got %T", raw)
	}
	var cfg Config
	seen := map[string]string{}
	for _, name := range sortedKeys(block) {
		if other, dup := seen[strings.ToLower(name)]; dup {
			// environment variables arrive lower-cased: an override of
			// store "Orders" would silently make a second store "orders"
			return Config{}, Errorf(Join(path, name), "differs from store %q only in case (environment overrides arrive lower-cased: name stores in lower case)", other)
		}
		seen[strings.ToLower(name)] = name
		st, err := loadStore(Join(path, name), name, block[name])
		if err != nil {
			return Config{}, err
		}
		cfg.Stores = append(cfg.Stores, st)
	}
	if len(cfg.Stores) == 0 {
		return Config{}, Errorf(path, "no store configured")
	}
	for _, st := range cfg.Stores {
		if st.Default {
			if cfg.Default != "" {
				return Config{}, Errorf(Join(st.Path, "default"), "store %q is already the default", cfg.Default)
			}
			cfg.Default = st.Name
		}
	}
	if cfg.Default == "" {
		i := slices.IndexFunc(cfg.Stores, func(s Store) bool { return s.Name == DefaultStore })
		if i < 0 && len(cfg.Stores) == 1 {
			i = 0
		}
		if i >= 0 && !cfg.Stores[i].defaultSet { // not a store saying default: false
			cfg.Default = cfg.Stores[i].Name
		}
	}
	return cfg, nil
}

// storeKeys are a store block's keys, for errors; they are matched in any
// case (environment variables arrive lower-cased: retrydelay).
var storeKeys = []string{"application", "default", "driver", "maxNameLength", "prefix", "retryDelay", "timeout", "traceAll", "ttl"}

func loadStore(path, name string, raw any) (Store, error) {
	st := Store{Name: name, Path: path, Driver: Driver{Type: "memory", Path: Join(path, "driver")}}
	if name == "" || strings.ContainsAny(name, " \t\n") {
		return st, Errorf(path, "invalid store name %q", name)
	}
	block, ok := raw.(map[string]any)
	if !ok {
		return st, Errorf(path, "must be a map with driver, prefix, ttl, timeout, retryDelay; got %T", raw)
	}
	// Sorted, so that of two spellings of a key (retryDelay from a file,
	// retrydelay from the environment) the lower-case one wins.
	for _, key := range sortedKeys(block) {
		p, v := Join(path, key), block[key]
		var err error
		switch strings.ToLower(key) {
		case "driver":
			st.Driver, err = loadDriver(p, v)
		case "prefix":
			s, ok := v.(string)
			switch {
			case !ok:
				err = Errorf(p, "must be a string")
			case s == "":
				err = Errorf(p, "must not be empty")
			}
			st.Prefix = s
		case "ttl":
			st.TTL, err = duration(p, v)
			if err == nil && st.TTL == 0 {
				err = Errorf(p, "must be positive (leave the key out for the default, %v)", component.DefaultTTL)
			}
		case "timeout":
			st.Timeout, err = timeout(p, v)
		case "retrydelay":
			st.RetryDelay, err = duration(p, v)
		case "maxnamelength":
			st.MaxNameLength, err = positiveInt(p, v)
		case "default":
			st.Default, err = boolean(p, v)
			st.defaultSet = true
		case "application":
			st.Application, err = application(p, v)
		case "traceall":
			st.TraceAll, err = boolean(p, v)
		default:
			err = unknownKey(p, key, storeKeys)
		}
		if err != nil {
			return st, err
		}
	}
	return st, validate(st)
}

// validate checks a store's options with the component's own rules
// (component.Options.Validate), at the key path of the offending option.
func validate(st Store) error {
	opts := component.Options{TTL: st.TTL, Timeout: st.Timeout, RetryDelay: st.RetryDelay, MaxNameLength: st.MaxNameLength}
	return OptionError(st.Path, opts.Validate())
}

// OptionError returns err, a *component.OptionError of a store's options,
// as an *Error at the key path of its field under the store's path
// ("mutex.orders.ttl"); other errors are returned as they are.
func OptionError(path string, err error) error {
	var oe *component.OptionError
	if !errors.As(err, &oe) {
		return err
	}
	key := strings.ToLower(oe.Field[:1]) + oe.Field[1:] // RetryDelay: retryDelay
	if strings.ToUpper(oe.Field) == oe.Field {
		key = strings.ToLower(oe.Field) // TTL: ttl
	}
	return Errorf(Join(path, key), "%s", oe.Msg)
}

// timeout reads a store's timeout: a duration, "nowait" (one attempt), -1
// or "infinite" (no limit). Zero is refused: it once meant one attempt, and
// a timeout of zero now means "not set" everywhere (component.Options).
func timeout(path string, v any) (time.Duration, error) {
	if s, ok := v.(string); ok && strings.EqualFold(strings.TrimSpace(s), "nowait") {
		return NoWait, nil
	}
	d, err := duration(path, v)
	switch {
	case err != nil:
		return 0, err
	case d == 0:
		return 0, Errorf(path, "zero is not a timeout: write nowait for one attempt, or leave the key out for the default (%v)", component.DefaultTimeout)
	case d < 0 && d != Forever:
		return 0, Errorf(path, "must not be negative (-1 or \"infinite\": no limit), got %v", d)
	}
	return d, nil
}

func loadDriver(path string, v any) (Driver, error) {
	d := Driver{Path: path, Options: map[string]any{}}
	typed := false // a type was given, even an empty one
	switch x := v.(type) {
	case string: // driver: memory
		d.Type, typed = x, true
	case map[string]any:
		// Sorted, as a store block's keys: of two spellings (Type from a
		// file, type from the environment) the lower-case one wins, the
		// same in every run.
		for _, k := range sortedKeys(x) {
			val := x[k]
			switch strings.ToLower(k) {
			case "type":
				s, ok := val.(string)
				if !ok {
					return d, Errorf(Join(path, k), "must be a string")
				}
				d.Type, typed = s, true
			case "client":
				s, ok := val.(string)
				if !ok || s == "" {
					return d, Errorf(Join(path, k), "must name a client in the fx graph")
				}
				d.Client = s
			default:
				d.Options[k] = val
			}
		}
	default:
		return d, Errorf(path, "must be a driver type or a map with a type, got %T", v)
	}
	if !typed && len(d.Options) == 0 && d.Client == "" {
		d.Type, typed = "memory", true // driver: {}, as no driver block
	}
	return d, checkType(d, typed)
}

// knownTypes are the driver types mutexfx ships, for errors.
var knownTypes = drivers.Shipped()

// checkType refuses an empty type, which would quietly make a lock meant to
// be shared between processes a per-process one (driver: "" from a file, or
// an empty MUTEXFX_MUTEX__ORDERS__DRIVER__TYPE), and driver options without
// a type (only MUTEXFX_MUTEX__ORDERS__DRIVER__ADDRS set).
func checkType(d Driver, typed bool) error {
	p := Join(d.Path, "type")
	switch {
	case typed && strings.TrimSpace(d.Type) == "":
		return Errorf(p, "empty (%s)", knownTypes)
	case !typed && (len(d.Options) > 0 || d.Client != ""):
		return Errorf(p, "required when driver options are given (%s)", knownTypes)
	case urlLike(d.Type):
		// driver: "redis://user:password@host": the type would be quoted
		// in errors and logs
		return Errorf(p, "a URL or DSN, not a driver type (not shown: it may hold a password); "+
			"write driver: {type: redis, url: ...} (%s)", knownTypes)
	}
	return nil
}

func duration(path string, v any) (time.Duration, error) {
	d, err := ParseDuration(v)
	if err != nil {
		return 0, Errorf(path, "%v", err)
	}
	return d, nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// String describes the store without its driver options (which may hold
// credentials).
func (s Store) String() string {
	return fmt.Sprintf("store %q (driver %s)", s.Name, redactType(s.Driver.Type))
}

// positiveInt reads an integer of at least 1, or its text as the
// environment gives it ("1024").
func positiveInt(path string, v any) (int, error) {
	var n int64
	var err error
	switch x := v.(type) {
	case int:
		n = int64(x)
	case int64:
		n = x
	case float64:
		n = int64(x)
		if float64(n) != x {
			err = strconv.ErrSyntax
		}
	case string:
		n, err = strconv.ParseInt(strings.TrimSpace(x), 10, 0)
	default:
		err = strconv.ErrSyntax
	}
	if err != nil || n < 1 {
		return 0, Errorf(path, "must be a whole number of at least 1, got %v", v)
	}
	return int(n), nil
}

// boolean reads a bool, or its text as the environment gives it ("true").
func boolean(path string, v any) (bool, error) {
	switch b := v.(type) {
	case bool:
		return b, nil
	case string:
		if parsed, err := strconv.ParseBool(strings.TrimSpace(b)); err == nil {
			return parsed, nil
		}
	}
	return false, Errorf(path, "must be true or false")
}
