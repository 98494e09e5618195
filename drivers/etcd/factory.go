package etcd

import (
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
	return kit.Factory[Options, *clientv3.Client, *Driver]{
		Client:         "a *clientv3.Client",
		ConnectionKeys: connectionKeys,
		New:            New,
		NewWithClient:  NewWithClient,
	}.Of(Type)
}

// connectionKeys are the connection options, which a client given to
// NewWithClient makes meaningless.
var connectionKeys = []string{"endpoints", "username", "password", "tls", "dialTimeout"}
