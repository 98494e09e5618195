package redis

import (
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/drivertest"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// aclServer starts a throwaway server with the ACL users given (ACL SETUSER
// arguments after the name, password "pw") and returns a driver as the
// default user.
func aclServer(t *testing.T, users map[string][]any) (*testutil.RedisServer, *Driver) {
	t.Helper()
	s := testutil.StartRedis(t)
	known(t, s)
	admin := standalone(t, Options{Addrs: []string{s.Addr}})
	for name, rules := range users {
		args := append([]any{"ACL", "SETUSER", name, "on", ">pw"}, rules...)
		if err := admin.Client().Do(t.Context(), args...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	return s, admin
}

// TestFencesWithoutTime: a least-privilege user without TIME (it is only in
// @fast) cannot seed a missing fence counter. The call fails, and leaves the
// counter missing: a counter left at 1 would hand out fences below those
// given before (after a restart without persistence, or fenceTTL).
func TestFencesWithoutTime(t *testing.T) {
	s, admin := aclServer(t, map[string][]any{"lp": {"~*", "&*", "+@read", "+@write", "+@scripting", "+@connection", "+@pubsub"}})
	d := standalone(t, Options{Addrs: []string{s.Addr}, Username: "lp", Password: "pw"})
	key := "notime"
	before, err := admin.Acquire(t.Context(), drivers.AcquireRequest{Key: key, Token: "a", TTL: time.Second})
	if err != nil || !before.Acquired {
		t.Fatalf("admin: %+v, %v", before, err)
	}
	if ok, err := admin.Release(t.Context(), key, "a"); err != nil || !ok {
		t.Fatalf("release: %v, %v", ok, err)
	}
	if err := admin.Client().Del(t.Context(), fenceKey(key)).Err(); err != nil { // as a restart without persistence does
		t.Fatal(err)
	}
	for i := range 2 {
		res, err := d.Acquire(t.Context(), drivers.AcquireRequest{Key: key, Token: "t", TTL: time.Second})
		if err == nil && res.Acquired && res.Fence <= before.Fence {
			t.Fatalf("attempt %d: fence %d after %d", i+1, res.Fence, before.Fence)
		}
		if err == nil {
			t.Fatalf("attempt %d = %+v; want an error (TIME refused)", i+1, res)
		}
		if n := admin.Client().Exists(t.Context(), fenceKey(key)).Val(); n != 0 {
			t.Fatalf("attempt %d left the fence counter behind", i+1)
		}
		if _, err := d.Release(t.Context(), key, "t"); err != nil { // what the component's cleanup does
			t.Fatal(err)
		}
	}
}

// TestPassWithoutPubSub: a user refused every channel (Redis 7's default
// for a new ACL user) or the Pub/Sub commands still releases a contended
// lock, and its waiter gets it by polling, long before the ttl.
func TestPassWithoutPubSub(t *testing.T) {
	s, _ := aclServer(t, map[string][]any{
		"nochan":   {"~*", "+@all"},
		"nopubsub": {"~*", "&*", "+@all", "-@pubsub"},
	})
	for _, user := range []string{"nochan", "nopubsub"} {
		t.Run(user, func(t *testing.T) {
			opts := Options{Addrs: []string{s.Addr}, Username: user, Password: "pw"}
			h, w := standalone(t, opts), standalone(t, opts)
			key := "acl:" + user
			if res, err := h.Acquire(t.Context(), drivers.AcquireRequest{Key: key, Token: "h", TTL: 10 * time.Second}); err != nil || !res.Acquired {
				t.Fatalf("h: %+v, %v", res, err)
			}
			got := drivertest.AcquireAsync(t.Context(), w, drivers.AcquireRequest{Key: key, Token: "w", TTL: 10 * time.Second, Wait: 8 * time.Second})
			queued(t, w, key, 1)
			start := time.Now()
			if ok, err := h.Release(t.Context(), key, "h"); err != nil || !ok {
				t.Fatalf("contended release = %v, %v; want released", ok, err)
			}
			r := <-got
			if r.Err != nil || !r.Res.Acquired {
				t.Fatalf("waiter = %+v, %v", r.Res, r.Err)
			}
			if e := time.Since(start); e > 2*time.Second {
				t.Fatalf("waiter got the lock %v after the release; want its poll's delay", e)
			}
		})
	}
}
