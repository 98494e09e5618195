// Package kit holds what the networked drivers share: the factory
// skeleton (decode the driver block, check the client, build lazily), the
// errors of invalid options at their key path, the closed flag and
// idempotent Close, the subscribers' fan-out (Listeners), the pacing of
// waits that retry in the store's queue, the TLS options, and a Gate that
// holds calls back while a store is down. Printing with secrets redacted
// is package internal/redact; SQL drivers also share sqlkit (life, schema,
// retries), dbconn (a database/sql pool's sockets, kept statements and
// connections) and hangup (sessions the server ended). A driver writes
// only what is specific to its store.
package kit

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"go.uber.org/zap"

	"github.com/mutexfx/mutexfx/config"
	"github.com/mutexfx/mutexfx/drivers"
)

// Factory is the skeleton of a drivers.Factory's New for a driver with
// options O that can also use an application's client C, giving drivers
// of type D.
type Factory[O, C any, D drivers.Driver] struct {
	// Client names C in errors: "a *sql.DB", "a redis.UniversalClient".
	Client string
	// Check, when set, looks at the block's raw options before they are
	// decoded (to refuse renamed keys with a hint).
	Check func(path string, options map[string]any) error
	// ConnectionKey, when set, names a connection option set in the
	// options, which the application's client makes meaningless, or "".
	ConnectionKey func(O) string
	// ConnectionKeys, when set (in place of ConnectionKey), are the
	// configuration keys of the connection options, in the order errors
	// name them: see SetKey.
	ConnectionKeys []string
	// ClientOptions says why ConnectionKey's option is refused; default
	// "the client's own options apply".
	ClientOptions string
	// New builds a driver with its own connection; it connects nothing.
	New func(opts O, log *zap.Logger) (D, error)
	// NewWithClient builds a driver on the application's client.
	NewWithClient func(client C, opts O) (D, error)
}

// Of returns the drivers.Factory of driver type typ: Build as its New,
// C as its ClientType.
func (f Factory[O, C, D]) Of(typ string) drivers.Factory {
	return drivers.Factory{Type: typ, New: f.Build, ClientType: reflect.TypeFor[C]()}
}

// Build decodes spec.Options into O (unknown keys are errors), refuses a
// client of another type than C and connection options set beside a
// client, and builds the driver with New or NewWithClient. Every error
// names its key path; an invalid option's matches drivers.ErrOptions.
func (f Factory[O, C, D]) Build(spec drivers.Spec) (drivers.Driver, error) {
	if f.Check != nil {
		if err := f.Check(spec.Path, spec.Options); err != nil {
			return nil, options(err)
		}
	}
	var opts O
	if err := config.Decode(spec.Path, spec.Options, &opts); err != nil {
		return nil, options(err)
	}
	var (
		d   D
		err error
	)
	if spec.Client != nil {
		c, ok := spec.Client.(C)
		if !ok {
			return nil, options(config.Errorf(config.Join(spec.Path, "client"), "is a %T, not %s", spec.Client, f.Client))
		}
		if f.ConnectionKey != nil || f.ConnectionKeys != nil {
			if k := f.connectionKey(opts); k != "" {
				why := f.ClientOptions
				if why == "" {
					why = "the client's own options apply"
				}
				return nil, options(config.Errorf(config.Join(spec.Path, k), "cannot be set with client (%s)", why))
			}
		}
		d, err = f.NewWithClient(c, opts)
	} else {
		d, err = f.New(opts, spec.Logger)
	}
	if err != nil {
		return nil, SpecError(spec.Path, err)
	}
	return d, nil
}

// connectionKey names a connection option set in opts, or "".
func (f Factory[O, C, D]) connectionKey(opts O) string {
	if f.ConnectionKey != nil {
		return f.ConnectionKey(opts)
	}
	return SetKey(opts, f.ConnectionKeys...)
}

// SetKey returns the first of keys that names a field of the struct opts
// that is set (not its zero value), or "". A key names the field whose
// koanf tag it is, and the fields whose tags start with it followed by an
// upper-case letter: "tls" names tls, tlsCAFile, tlsServerName, ….
func SetKey(opts any, keys ...string) string {
	v := reflect.ValueOf(opts)
	for _, k := range keys {
		for i := range v.NumField() {
			tag := v.Type().Field(i).Tag.Get("koanf")
			rest, ok := strings.CutPrefix(tag, k)
			if ok && (rest == "" || rest[0] >= 'A' && rest[0] <= 'Z') && !v.Field(i).IsZero() {
				return k
			}
		}
	}
	return ""
}

// NewFactory returns the Factory of a driver that logs nothing, built by
// newDriver or, on the application's client (named client in errors:
// "a *sql.DB"), by withClient.
func NewFactory[O, C any, D drivers.Driver](client string, newDriver func(O) (D, error), withClient func(C, O) (D, error)) Factory[O, C, D] {
	return Factory[O, C, D]{
		Client:        client,
		New:           func(opts O, _ *zap.Logger) (D, error) { return newDriver(opts) },
		NewWithClient: withClient,
	}
}

// options returns a *config.Error as an invalid option: it reads and
// unwraps as the *config.Error and matches drivers.ErrOptions.
func options(err error) error {
	var ce *config.Error
	if errors.As(err, &ce) {
		return &drivers.OptionsError{Err: err}
	}
	return err
}

// SpecError returns an error of a driver's New (or NewWithClient) at the
// driver block's key path. An invalid option — a *drivers.OptionsError or a
// *config.Error at a path relative to the block — becomes a *drivers.OptionsError
// whose Err is a *config.Error at the option's full key path ("path.key:
// what"). Another error is prefixed with path.
func SpecError(path string, err error) error {
	var (
		oe *drivers.OptionsError
		ce *config.Error
	)
	switch {
	case errors.As(err, &ce):
		return at(path, ce.Path, ce.Msg)
	case errors.As(err, &oe):
		return at(path, oe.Key, oe.Err.Error())
	}
	return fmt.Errorf("%s: %w", path, err)
}

// at returns an invalid option at key below path (at path for "").
func at(path, key, msg string) error {
	if key != "" {
		path = config.Join(path, key)
	}
	return &drivers.OptionsError{Err: &config.Error{Path: path, Msg: msg}}
}
