package etcd

import (
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/status"

	"github.com/mutexfx/mutexfx/drivers"
)

// permanentErrors are the etcd errors that retrying cannot cure: wrong
// credentials, a user or role the cluster does not know, a permission the
// user's roles lack, credentials given to a cluster without
// authentication. Leader changes, unreachable members, timeouts and
// expired auth tokens (which the client renews) are not among them.
var permanentErrors = []error{
	rpctypes.ErrAuthFailed,
	rpctypes.ErrUserEmpty,
	rpctypes.ErrUserNotFound,
	rpctypes.ErrRoleNotGranted,
	rpctypes.ErrPermissionDenied,
	rpctypes.ErrAuthNotEnabled,
}

// permanent returns err marked drivers.Permanent when it is one of
// permanentErrors (as the client returns them, or as a bare gRPC status),
// else err unchanged.
func permanent(err error) error {
	if err == nil || errors.Is(err, drivers.ErrPermanent) {
		return err
	}
	e := err
	var st interface{ GRPCStatus() *status.Status }
	if errors.As(err, &st) {
		e = rpctypes.Error(st.GRPCStatus().Err())
	}
	for _, p := range permanentErrors {
		if errors.Is(err, p) || errors.Is(e, p) {
			return drivers.Permanent(err)
		}
	}
	return err
}
