//go:build unix

package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mutexfx/mutexfx/drivers/drivertest"
)

// TestPermanentErrors: refused credentials, unknown users and roles,
// missing permissions and credentials sent to a cluster without
// authentication are permanent, as the client returns them or as bare
// gRPC statuses; leader changes, timeouts, unreachable members and
// expired auth tokens are not.
func TestPermanentErrors(t *testing.T) {
	drivertest.CheckPermanent(t, permanent, []drivertest.Classified{
		{Err: rpctypes.ErrAuthFailed, Permanent: true},
		{Err: fmt.Errorf("etcd: connect: %w", rpctypes.ErrAuthFailed), Permanent: true},
		{Err: rpctypes.ErrGRPCAuthFailed, Permanent: true},
		{Err: fmt.Errorf("etcd: acquire: %w", rpctypes.ErrGRPCPermissionDenied), Permanent: true},
		{Err: rpctypes.ErrPermissionDenied, Permanent: true},
		{Err: rpctypes.ErrUserEmpty, Permanent: true},
		{Err: rpctypes.ErrUserNotFound, Permanent: true},
		{Err: rpctypes.ErrRoleNotGranted, Permanent: true},
		{Err: rpctypes.ErrAuthNotEnabled, Permanent: true},
		{Err: rpctypes.ErrInvalidAuthToken, Permanent: false},
		{Err: rpctypes.ErrNoLeader, Permanent: false},
		{Err: rpctypes.ErrLeaderChanged, Permanent: false},
		{Err: rpctypes.ErrTimeout, Permanent: false},
		{Err: rpctypes.ErrGRPCTimeoutDueToLeaderFail, Permanent: false},
		{Err: status.Error(codes.Unavailable, "connection refused"), Permanent: false},
		{Err: context.DeadlineExceeded, Permanent: false},
		{Err: errors.New("etcd: no endpoint reachable within the dial timeout (5s)"), Permanent: false},
	})
}

// TestAcquirePermanent: on a cluster with authentication on, an Acquire
// waiting 5 s fails within a second with a wrong password, and with keys
// outside the user's role (keyPrefix not under its range), without the
// password.
func TestAcquirePermanent(t *testing.T) {
	c := authCluster(t)
	for _, tc := range []struct {
		name string
		opts Options
		want error
	}{
		{"wrongPassword", Options{Username: "app", Password: "Wr0ngPW", KeyPrefix: "app/"}, rpctypes.ErrAuthFailed},
		{"outsideRole", Options{Username: "app", Password: "S3cr3tPW", KeyPrefix: "other/"}, rpctypes.ErrPermissionDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Endpoints = c.Endpoints()
			err := drivertest.AcquireFailsAtOnce(t, open(t, tc.opts))
			if !errors.Is(err, tc.want) || strings.Contains(err.Error(), "Wr0ngPW") || strings.Contains(err.Error(), "S3cr3tPW") {
				t.Fatalf("Acquire = %v; want %v, without the password", err, tc.want)
			}
		})
	}
}
