package redis

import (
	"errors"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mutexfx/mutexfx/drivers"
)

// errUnknownMaster is matched by the error of a Sentinel driver whose
// sentinels know no master of the configured name (see explain).
var errUnknownMaster = errors.New("redis: sentinels know no such master")

// permanent returns err marked drivers.Permanent when retrying cannot cure
// it, else err unchanged:
//
//   - authentication refused (WRONGPASS, NOAUTH) or a command the ACL user
//     may not run (NOPERM);
//   - a Cluster node behind a driver not in Cluster mode (ErrClusterNode);
//   - sentinels that know no master of the configured name;
//   - a database number the server does not have (SELECT's "DB index is
//     out of range").
//
// A fail-over, a restart or a full cluster end by themselves and stay
// retryable: READONLY, LOADING, MASTERDOWN, CLUSTERDOWN, TRYAGAIN, MOVED
// and ASK in Cluster mode, network errors and ErrUnavailable.
func permanent(err error) error {
	if err == nil || errors.Is(err, drivers.ErrPermanent) {
		return err
	}
	if goredis.IsAuthError(err) || goredis.IsPermissionError(err) ||
		errors.Is(err, ErrClusterNode) || errors.Is(err, errUnknownMaster) ||
		strings.Contains(err.Error(), "DB index is out of range") {
		return drivers.Permanent(err)
	}
	return err
}
