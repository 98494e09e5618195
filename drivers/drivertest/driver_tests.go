package drivertest

import (
	"strings"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
)

// driverTests check the driver contract directly.
func (s *suite) driverTests(t *testing.T) {
	t.Run("TokenOwnership", s.testTokenOwnership)
	t.Run("Fencing", s.testFencing)
	t.Run("Expiry", s.testExpiry)
	t.Run("NamesAreData", s.testNamesAreData)
	t.Run("Inspect", s.testInspect)
	t.Run("RenewBatch", s.testRenewBatch)
	t.Run("EndedContext", s.testEndedContext)
	t.Run("DeadlineMidCall", s.testDeadlineMidCall)
}

func (s *suite) testTokenOwnership(t *testing.T) {
	ctx := ctxT(t)
	a, b := s.driver(t), s.driver(t)
	key, ta, tb := "drivertest:"+name(t), token(), token()

	res, err := a.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: ta, TTL: 10 * time.Second})
	if err != nil || !res.Acquired {
		t.Fatalf("first Acquire = %+v, %v; want acquired", res, err)
	}
	res, err = b.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tb, TTL: 10 * time.Second})
	if err != nil || res.Acquired {
		t.Fatalf("second holder's Acquire = %+v, %v; want not acquired", res, err)
	}
	if drivers.FeaturesOf(a).Expiring && (res.HolderTTL <= 0 || res.HolderTTL > 10*time.Second) {
		t.Errorf("HolderTTL = %v; want in (0, 10s] from an expiring store", res.HolderTTL)
	}
	for _, d := range []drivers.Driver{a, b} {
		if ok, err := d.Release(ctx, key, tb); err != nil || ok {
			t.Errorf("Release with a stranger's token = %v, %v; want false", ok, err)
		}
		if ok, err := d.Extend(ctx, key, tb, time.Second); err != nil || ok {
			t.Errorf("Extend with a stranger's token = %v, %v; want false", ok, err)
		}
	}
	if ok, err := a.Extend(ctx, key, ta, 10*time.Second); err != nil || !ok {
		t.Errorf("holder's Extend = %v, %v; want true", ok, err)
	}
	if ok, err := a.Release(ctx, key, ta); err != nil || !ok {
		t.Fatalf("holder's Release = %v, %v; want true", ok, err)
	}
	if ok, err := a.Release(ctx, key, ta); err != nil || ok {
		t.Errorf("second Release = %v, %v; want false", ok, err)
	}
	if ok, err := a.Extend(ctx, key, ta, time.Second); err != nil || ok {
		t.Errorf("Extend after Release = %v, %v; want false", ok, err)
	}
	res, err = b.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tb, TTL: 10 * time.Second})
	if err != nil || !res.Acquired {
		t.Fatalf("Acquire after Release = %+v, %v; want acquired", res, err)
	}
	if ok, err := b.Release(ctx, key, tb); err != nil || !ok {
		t.Errorf("Release = %v, %v; want true", ok, err)
	}
}

func (s *suite) testFencing(t *testing.T) {
	ctx := ctxT(t)
	a, b := s.driver(t), s.driver(t)
	fencing := drivers.FeaturesOf(a).Fencing
	keys := []string{"drivertest:" + name(t), "drivertest:" + name(t)}
	last := map[string]uint64{}
	for i := range 20 {
		d, key, tok := []drivers.Driver{a, b}[i%3%2], keys[i%2], token()
		res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: 10 * time.Second})
		if err != nil || !res.Acquired {
			t.Fatalf("Acquire #%d = %+v, %v", i, res, err)
		}
		switch {
		case !fencing && res.Fence != 0:
			t.Fatalf("fence %d from a driver that states no fencing", res.Fence)
		case fencing && res.Fence <= last[key]:
			t.Fatalf("fence of %q went from %d to %d", key, last[key], res.Fence)
		}
		last[key] = res.Fence
		if ok, err := d.Release(ctx, key, tok); err != nil || !ok {
			t.Fatalf("Release #%d = %v, %v", i, ok, err)
		}
	}
}

func (s *suite) testExpiry(t *testing.T) {
	ctx := ctxT(t)
	a, b := s.driver(t), s.driver(t)
	if !drivers.FeaturesOf(a).Expiring {
		t.Log("session locks do not expire: checking the lock outlives its ttl")
	}
	key, ta, tb := "drivertest:"+name(t), token(), token()
	ttl := 200 * time.Millisecond
	// Before the call: the store starts the ttl when the call reaches it,
	// which a loaded machine can delay well past our clock's reading.
	start := time.Now()
	if res, err := a.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: ta, TTL: ttl}); err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	if !drivers.FeaturesOf(a).Expiring {
		time.Sleep(2 * ttl) // the property under test is the passing of time
		res, err := b.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tb, TTL: ttl})
		if err != nil || res.Acquired {
			t.Fatalf("session lock taken after its ttl: %+v, %v", res, err)
		}
		if ok, err := a.Release(ctx, key, ta); err != nil || !ok {
			t.Fatalf("Release = %v, %v", ok, err)
		}
		return
	}
	var got drivers.AcquireResult
	waitFor(t, 5*time.Second, "the expired lock to be free", func() bool {
		res, err := b.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tb, TTL: 10 * time.Second})
		if err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		got = res
		return res.Acquired
	})
	if e := time.Since(start); e < ttl-clockTolerance {
		t.Fatalf("lock taken %v after it was acquired with ttl %v", e, ttl)
	}
	if ok, err := a.Extend(ctx, key, ta, time.Second); err != nil || ok {
		t.Errorf("expired holder's Extend = %v, %v; want false", ok, err)
	}
	if ok, err := a.Release(ctx, key, ta); err != nil || ok {
		t.Errorf("expired holder's Release = %v, %v; want false", ok, err)
	}
	if ok, err := b.Release(ctx, key, tb); err != nil || !ok {
		t.Errorf("new holder's Release = %v, %v (fence %d); want true", ok, err, got.Fence)
	}
}

// clockTolerance allows for a store whose clock differs a little from ours.
const clockTolerance = 20 * time.Millisecond

// oddNames are lock names that must be plain data to every store.
func oddNames() []string {
	return []string{
		`quote'd "name"`, `back\slash\\`, `percent%_like%`, "unicode: ключ 鍵 🔒",
		"../../etc/passwd", "/", ".", "{hash}tag}{", "semi;colon -- comment", "Case", "case",
		"space name", strings.Repeat("long", 2560), // 10 KB
	}
}

func (s *suite) testNamesAreData(t *testing.T) {
	ctx := ctxT(t)
	a, b := s.driver(t), s.driver(t)
	base := "drivertest:" + name(t) + ":"
	toks := map[string]string{}
	for _, n := range oddNames() {
		tok := token()
		res, err := a.Acquire(ctx, drivers.AcquireRequest{Key: base + n, Token: tok, TTL: 10 * time.Second})
		if err != nil || !res.Acquired {
			t.Fatalf("Acquire %.40q = %+v, %v; want acquired (distinct names are distinct locks)", n, res, err)
		}
		toks[n] = tok
	}
	for _, n := range oddNames() {
		res, err := b.Acquire(ctx, drivers.AcquireRequest{Key: base + n, Token: token(), TTL: 10 * time.Second})
		if err != nil || res.Acquired {
			t.Fatalf("second Acquire %.40q = %+v, %v; want held", n, res, err)
		}
	}
	for _, n := range oddNames() {
		if ok, err := a.Release(ctx, base+n, toks[n]); err != nil || !ok {
			t.Fatalf("Release %.40q = %v, %v", n, ok, err)
		}
	}
}

func (s *suite) testInspect(t *testing.T) {
	ctx := ctxT(t)
	d := s.driver(t)
	in, ok := d.(drivers.Inspector)
	if !ok {
		t.Log("the driver has no Inspector")
		return
	}
	key, tok := "drivertest:"+name(t), token()
	if _, held, err := in.Inspect(ctx, key); err != nil || held {
		t.Fatalf("Inspect of a free lock = held %v, %v", held, err)
	}
	res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: 10 * time.Second})
	if err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	info, held, err := in.Inspect(ctx, key)
	if err != nil || !held || info.Token != tok || info.Fence != res.Fence {
		t.Fatalf("Inspect = %+v, %v, %v; want token %q fence %d", info, held, err, tok, res.Fence)
	}
	if drivers.FeaturesOf(d).Expiring && (info.TTL <= 0 || info.TTL > 10*time.Second) {
		t.Errorf("Inspect TTL = %v; want in (0, 10s]", info.TTL)
	}
	if ok, err := d.Release(ctx, key, tok); err != nil || !ok {
		t.Fatalf("Release = %v, %v", ok, err)
	}
}

func (s *suite) testRenewBatch(t *testing.T) {
	ctx := ctxT(t)
	d := s.driver(t)
	r, ok := d.(drivers.Renewer)
	if !ok {
		t.Log("the driver has no Renewer: the component extends locks one by one")
		return
	}
	// acquired for 30 s (50 acquisitions take seconds on a loaded machine),
	// renewed to a minute
	var leases []drivers.Lease
	for range 50 {
		l := drivers.Lease{Key: "drivertest:" + name(t), Token: token(), TTL: time.Minute}
		if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: l.Key, Token: l.Token, TTL: 30 * time.Second}); err != nil || !res.Acquired {
			t.Fatalf("Acquire = %+v, %v", res, err)
		}
		leases = append(leases, l)
	}
	// One lease that is not held and one held by another token.
	leases = append(leases, drivers.Lease{Key: "drivertest:" + name(t), Token: token(), TTL: time.Second})
	stranger := leases[0]
	stranger.Token = token()
	leases = append(leases, stranger)

	res := r.Renew(ctx, leases)
	if len(res) != len(leases) {
		t.Fatalf("Renew returned %d results for %d leases", len(res), len(leases))
	}
	for i, rr := range res {
		want := i < 50
		if rr.Err != nil || rr.Held != want {
			t.Errorf("lease %d: %+v; want held %v", i, rr, want)
		}
	}
	if in, ok := d.(drivers.Inspector); ok && drivers.FeaturesOf(d).Expiring {
		info, held, err := in.Inspect(ctx, leases[0].Key)
		if err != nil || !held || info.TTL <= 30*time.Second {
			t.Errorf("after Renew to 1m: %+v, %v, %v; want ttl > 30s", info, held, err)
		}
	}
	for _, l := range leases[:50] {
		if ok, err := d.Release(ctx, l.Key, l.Token); err != nil || !ok {
			t.Fatalf("Release = %v, %v", ok, err)
		}
	}
}
