package postgres

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mutexfx/mutexfx/config"
	"github.com/mutexfx/mutexfx/drivers"
)

// Factory returns the "postgres" driver factory. Its configuration keys are
// Options' koanf tags (url, host, port, database, username, password,
// sslMode, mode, table, channel, unlogged, synchronousCommit, maxSessions,
// maxConns, connectTimeout, stallTimeout); with driver.client naming a
// *pgxpool.Pool, the connection keys must be absent. Each invalid option
// (an unknown key and a value of the wrong type included) is a
// *config.Error at its full key path ("mutex.orders.driver.mode: ...") that
// also wraps ErrOptions, as the errors of New do.
func Factory() drivers.Factory {
	return drivers.Factory{
		Type:       "postgres",
		ClientType: reflect.TypeFor[*pgxpool.Pool](),
		New: func(spec drivers.Spec) (drivers.Driver, error) {
			d, err := build(spec)
			if err != nil {
				return nil, specError(spec.Path, err)
			}
			return d, nil
		},
	}
}

// build builds the driver of spec. Its *config.Error errors are at full
// key paths; New's option errors are relative to the driver block.
func build(spec drivers.Spec) (Driver, error) {
	var opts Options
	if err := config.Decode(spec.Path, spec.Options, &opts); err != nil {
		return nil, err
	}
	if spec.Client == nil {
		return New(opts)
	}
	pool, ok := spec.Client.(*pgxpool.Pool)
	if !ok {
		return nil, config.Errorf(config.Join(spec.Path, "client"), "is a %T, not a *pgxpool.Pool", spec.Client)
	}
	if k := connectionKey(opts); k != "" {
		return nil, config.Errorf(config.Join(spec.Path, k), "cannot be set with client (the pool's own configuration applies)")
	}
	return NewWithPool(pool, opts)
}

// specError returns an invalid option's error as a pathError at the
// option's full key path: an optionError's key is joined to path, a
// *config.Error of the factory's own is at its full path already.
func specError(path string, err error) error {
	var oe optionError
	if errors.As(err, &oe) {
		full := path
		if oe.ce.Path != "" {
			full = config.Join(path, oe.ce.Path)
		}
		return pathError{ce: &config.Error{Path: full, Msg: oe.ce.Msg}}
	}
	var ce *config.Error
	if errors.As(err, &ce) {
		return pathError{ce: ce}
	}
	return fmt.Errorf("%s: %w", path, err)
}

// pathError is an invalid option at its full key path, as the factory
// returns it: it reads as its *config.Error ("mutex.orders.driver.mode:
// ..."), without "postgres: invalid options", and wraps both it and
// ErrOptions.
type pathError struct{ ce *config.Error }

func (e pathError) Error() string { return e.ce.Error() }

func (e pathError) Unwrap() []error { return []error{ErrOptions, e.ce} }

// connectionKey names a connection option set in o, or "".
func connectionKey(o Options) string {
	for _, f := range []struct {
		key string
		set bool
	}{
		{"url", o.URL != ""}, {"host", o.Host != ""}, {"port", o.Port != 0}, {"database", o.Database != ""},
		{"username", o.Username != ""}, {"password", o.Password != ""}, {"sslMode", o.SSLMode != ""},
	} {
		if f.set {
			return f.key
		}
	}
	return ""
}
