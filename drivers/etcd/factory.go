package etcd

import (
	"reflect"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/kit"
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
	return kit.Factory[Options, *clientv3.Client, *Driver]{
		Client:        "a *clientv3.Client",
		ConnectionKey: connectionKey,
		New:           New,
		NewWithClient: NewWithClient,
	}.Build(spec)
}

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
