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

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/drivertest"
)

// TestPermanentErrors: refused credentials, unknown users and roles,
// missing permissions and credentials sent to a cluster without
// authentication are permanent, as the client returns them or as bare
// gRPC statuses; leader changes, timeouts, unreachable members and
// expired auth tokens are not.
func TestPermanentErrors(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{rpctypes.ErrAuthFailed, true},
		{fmt.Errorf("etcd: connect: %w", rpctypes.ErrAuthFailed), true},
		{rpctypes.ErrGRPCAuthFailed, true},
		{fmt.Errorf("etcd: acquire: %w", rpctypes.ErrGRPCPermissionDenied), true},
		{rpctypes.ErrPermissionDenied, true},
		{rpctypes.ErrUserEmpty, true},
		{rpctypes.ErrUserNotFound, true},
		{rpctypes.ErrRoleNotGranted, true},
		{rpctypes.ErrAuthNotEnabled, true},
		{rpctypes.ErrInvalidAuthToken, false},
		{rpctypes.ErrNoLeader, false},
		{rpctypes.ErrLeaderChanged, false},
		{rpctypes.ErrTimeout, false},
		{rpctypes.ErrGRPCTimeoutDueToLeaderFail, false},
		{status.Error(codes.Unavailable, "connection refused"), false},
		{context.DeadlineExceeded, false},
		{errors.New("etcd: no endpoint reachable within the dial timeout (5s)"), false},
	} {
		got := permanent(tc.err)
		if errors.Is(got, drivers.ErrPermanent) != tc.want || !errors.Is(got, tc.err) || got.Error() != tc.err.Error() {
			t.Errorf("permanent(%v) = %v (permanent %v); want permanent %v, wrapping it, same message",
				tc.err, got, errors.Is(got, drivers.ErrPermanent), tc.want)
		}
	}
	if permanent(nil) != nil {
		t.Error("permanent(nil) != nil")
	}
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
