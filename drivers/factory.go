package drivers

import (
	"errors"
	"reflect"
	"slices"
	"strings"

	"go.uber.org/zap"
)

// ErrDriverNotFound reports a configured driver type that is not linked into
// the binary. Its message names the package to import.
var ErrDriverNotFound = errors.New("mutexfx: driver not found")

// Factory builds drivers of one type from configuration. Each driver package
// exports one (for example redis.Factory()); a binary links only the drivers
// whose factories it passes to the fx module, as database/sql links only the
// drivers it imports — but without init() side effects.
type Factory struct {
	// Type is the name used in configuration: driver.type.
	Type string
	// New builds a driver from its configuration block. It must connect
	// nothing. Errors must name spec.Path and the offending key.
	// mutexfx.Module calls it twice for a block without a client: once as
	// it reads the configuration, to validate the block (that driver is
	// closed unused), and once to build the store.
	New func(spec Spec) (Driver, error)
	// ClientType is, for drivers that can use a client the application
	// already has (driver.client in configuration names it in the fx graph),
	// the type of that client, for example reflect.TypeFor[redis.UniversalClient]().
	// Nil when the driver cannot.
	ClientType reflect.Type
}

// Spec is what a Factory gets to build a driver.
type Spec struct {
	// Path is the configuration key path of the driver block, for errors:
	// "mutex.orders.driver".
	Path string
	// Options is the driver block without its "type" and "client" keys, as
	// loaded by koanf (nested maps). Decode it with config.Decode, which
	// rejects unknown keys and reads durations.
	Options map[string]any
	// Client is the application's client named by driver.client (of
	// Factory.ClientType), or nil. A driver built on it never closes it.
	Client any
	// Logger is the store's logger (never nil). Never log credentials.
	Logger *zap.Logger
}

// PackageOf returns the import path of the package that provides the driver
// type mutexfx ships under that name, or "" for an unknown type. A missing
// driver's error names it.
func PackageOf(driverType string) string {
	if i := slices.Index(shipped, driverType); i >= 0 {
		return modulePath + "/drivers/" + shipped[i]
	}
	return ""
}

// Shipped returns the driver types mutexfx ships, comma-separated, for
// errors.
func Shipped() string { return strings.Join(shipped, ", ") }

// shipped is the one list of the driver types mutexfx ships, each in its
// package drivers/<type>.
var shipped = []string{"memory", "file", "redis", "postgres", "mysql", "etcd"}

const modulePath = "github.com/mutexfx/mutexfx"

// Suggest returns the driver type mutexfx ships that an unknown type most
// likely means — the same name in another case ("Redis": "redis") or a
// well-known alias ("mariadb": "mysql"; "postgresql", "pg", "pgsql", "pgx":
// "postgres") — or "" when there is none. It only feeds errors: a type is
// matched exactly, never through Suggest.
func Suggest(driverType string) string {
	t := strings.ToLower(strings.TrimSpace(driverType))
	if a, ok := aliases[t]; ok {
		return a
	}
	if slices.Contains(shipped, t) && t != driverType {
		return t
	}
	return ""
}

var aliases = map[string]string{
	"mariadb":    "mysql",
	"postgresql": "postgres",
	"pg":         "postgres",
	"pgsql":      "postgres",
	"pgx":        "postgres",
}
