package etcd

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mutexfx/mutexfx/config"
	"github.com/mutexfx/mutexfx/drivers"
)

// Type is the driver's name in configuration (driver.type).
const Type = "etcd"

// Factory returns the factory the mutexfx module uses to build etcd drivers
// from configuration. The driver block's keys are Options' koanf tags
// (endpoints, username, password, tls, tlsCAFile, tlsCertFile, tlsKeyFile,
// tlsServerName, tlsInsecureSkipVerify, dialTimeout, keyPrefix,
// waiterLinger); unknown keys are errors naming the full key path. With
// driver.client set (a *clientv3.Client in the fx graph), that client is
// used and never closed; then only keyPrefix and waiterLinger may be set.
func Factory() drivers.Factory {
	return drivers.Factory{
		Type:       Type,
		New:        newFromSpec,
		ClientType: reflect.TypeFor[*clientv3.Client](),
	}
}

func newFromSpec(spec drivers.Spec) (drivers.Driver, error) {
	var opts Options
	if err := config.Decode(spec.Path, spec.Options, &opts); err != nil {
		return nil, err
	}
	if spec.Client != nil {
		c, ok := spec.Client.(*clientv3.Client)
		if !ok || c == nil {
			return nil, config.Errorf(config.Join(spec.Path, "client"), "is a %T, not a *clientv3.Client", spec.Client)
		}
		if k := connectionKey(opts); k != "" {
			return nil, config.Errorf(config.Join(spec.Path, k), "cannot be set with client (the client's own options apply)")
		}
		d, err := NewWithClient(c, opts)
		if err != nil {
			return nil, specError(spec.Path, err)
		}
		return d, nil
	}
	d, err := New(opts, spec.Logger)
	if err != nil {
		return nil, specError(spec.Path, err)
	}
	return d, nil
}

// specError turns an ErrOptions error into a config error at the option's
// key path that still wraps ErrOptions.
func specError(path string, err error) error {
	if !errors.Is(err, ErrOptions) {
		return fmt.Errorf("%s: %w", path, err)
	}
	msg := strings.TrimPrefix(err.Error(), ErrOptions.Error()+": ")
	if key, rest, ok := strings.Cut(msg, ": "); ok && !strings.ContainsAny(key, " ,") {
		return pathError{&config.Error{Path: config.Join(path, key), Msg: rest}}
	}
	return pathError{&config.Error{Path: path, Msg: msg}}
}

// pathError is an invalid option at its full key path: it reads as its
// *config.Error and wraps both it and ErrOptions.
type pathError struct{ ce *config.Error }

func (e pathError) Error() string { return e.ce.Error() }

func (e pathError) Unwrap() []error { return []error{ErrOptions, e.ce} }

// connectionKey names a connection option set in o, or "".
func connectionKey(o Options) string {
	switch {
	case len(o.Endpoints) > 0:
		return "endpoints"
	case o.Username != "":
		return "username"
	case o.Password != "":
		return "password"
	case o.TLS || o.TLSCAFile != "" || o.TLSCertFile != "" || o.TLSKeyFile != "" || o.TLSServerName != "" || o.TLSInsecureSkipVerify:
		return "tls"
	case o.DialTimeout != 0:
		return "dialTimeout"
	}
	return ""
}
