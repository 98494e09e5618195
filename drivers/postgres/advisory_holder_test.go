package postgres

import (
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/sqltest"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestAdvisoryHolderShown: a driver inspecting an advisory lock another
// driver's session holds sees no token but the holder's identity, the
// part of the holder's token that names it, shown by the holding session
// after the application_name its URL sets; a token naming no holder, or
// one too long to show, leaves the holder unknown.
func TestAdvisoryHolderShown(t *testing.T) {
	ctx := ctxT(t)
	holder := on(t, testutil.PostgresDSN()+"&application_name=orders-api", Options{})
	other := shared(t, Options{})
	for _, tc := range []struct{ token, want string }{
		{rand.Text() + "~orders~host-1.example~4242~" + "mfx0a1b2c", "~orders~host-1.example~4242"},
		{"plain-token", ""},
		{rand.Text() + "~app~" + strings.Repeat("h", 64) + "~1~x", ""},
		// a session shows its last acquisition's identity
		{rand.Text() + "~billing~host-2~7~y", "~billing~host-2~7"},
	} {
		key := "holder:" + rand.Text()
		res, err := holder.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tc.token, TTL: time.Minute})
		if err != nil || !res.Acquired {
			t.Fatalf("Acquire = %+v, %v", res, err)
		}
		info, held, err := other.Inspect(ctx, key)
		if err != nil || !held || info.Token != "" || info.Holder != tc.want {
			t.Errorf("token %q: Inspect = %+v, %v, %v; want held by %q, no token", tc.token, info, held, err, tc.want)
		}
		if ok, err := holder.Release(ctx, key, tc.token); err != nil || !ok {
			t.Fatalf("Release = %v, %v", ok, err)
		}
		if info, held, err := other.Inspect(ctx, key); err != nil || held {
			t.Errorf("Inspect of a released lock = %+v, %v, %v", info, held, err)
		}
	}
}

// TestAdvisoryHolderOfOtherMutex: Inspect through one Mutex of an advisory
// lock held through another (another driver, another session) tells the
// holder's application, host and pid.
func TestAdvisoryHolderOfOtherMutex(t *testing.T) {
	sqltest.HolderOfOtherMutex(t, mutexOn(t, shared(t, Options{}), 5*time.Second), mutexOn(t, shared(t, Options{}), 5*time.Second))
}

// TestAdvisoryPing: an advisory driver pings the server on its main
// session, and fails once the server is down.
func TestAdvisoryPing(t *testing.T) {
	srv := testutil.StartPostgres(t)
	ctx := ctxT(t)
	d := on(t, srv.DSN, Options{})
	if _, err := d.Acquire(ctx, drivers.AcquireRequest{Key: "ping", Token: "t", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := d.Ping(ctx); err != nil {
		t.Fatalf("Ping = %v", err)
	}
	srv.Stop()
	if err := d.Ping(ctx); err == nil {
		t.Fatal("Ping of a stopped server = nil")
	}
}
