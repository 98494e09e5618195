package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mutexfx/mutexfx/drivers"
)

// run runs a script through the health gate: at once ErrUnavailable while
// the server of keys[0] (a Cluster: its master) is reconnecting, else one
// round trip (two the first time a server sees the script; one more the
// first time a Cluster driver uses a slot on a master: see cluster.go).
func (d *Driver) run(ctx context.Context, s *goredis.Script, keys []string, args ...any) (any, error) {
	return d.onMaster(ctx, true, keys[0], func(n *node) (any, error) { return d.eval(ctx, n, s, keys, args...) })
}

// exec runs a script past the health gate (for the cleanups that must try
// even while the server reconnects); it still fails on a closed driver,
// and in a Cluster still checks the slot first.
func (d *Driver) exec(ctx context.Context, s *goredis.Script, keys []string, args ...any) (any, error) {
	if d.isClosed() {
		return nil, ErrClosed
	}
	return d.onMaster(ctx, false, keys[0], func(n *node) (any, error) { return d.eval(ctx, n, s, keys, args...) })
}

// eval runs a script on n's server (in a Cluster on its master's own
// connection: see moved.go); a network error marks n down. Its callers run
// it through onMaster, which reloads the slot map on MOVED.
func (d *Driver) eval(ctx context.Context, n *node, s *goredis.Script, keys []string, args ...any) (any, error) {
	v, err := s.Run(ctx, d.scripter(n), keys, args...).Result()
	if err == goredis.Nil {
		return nil, nil
	}
	return v, d.explain(n.observe(ctx, err))
}

// Acquire takes req.Key for req.Token with req.TTL in the server's clock:
// one script, one round trip. With req.Wait zero it answers at once (and
// does not overtake queued waiters). With req.Wait positive the driver
// queues for its turn in Redis and waits up to req.Wait for it: the
// release that makes it first in line hands it the lock (the message on
// the driver's subscription carries the fence) or wakes it to retry; it
// also retries every WaitPollInterval (see Features.BlockingWait).
// Errors that retrying cannot cure match drivers.ErrPermanent (permanent).
func (d *Driver) Acquire(ctx context.Context, req drivers.AcquireRequest) (res drivers.AcquireResult, err error) {
	defer func() { err = permanent(err) }()
	if req.TTL <= 0 {
		return drivers.AcquireResult{}, fmt.Errorf("redis: acquire: ttl must be positive, got %v", req.TTL)
	}
	if req.Wait <= 0 {
		return d.acquireOnce(ctx, req, false)
	}
	return d.acquireWaiting(ctx, req)
}

// acquireOnce runs the acquire script once; queue says whether to join the
// waiters' queue when not acquired.
func (d *Driver) acquireOnce(ctx context.Context, req drivers.AcquireRequest, queue bool) (drivers.AcquireResult, error) {
	ttl := d.longest.see(req.TTL)
	fenceTTL := max(d.args.fenceTTLms, ttl)
	q := "0"
	if queue {
		q = "1"
	}
	t := tag(req.Key)
	e, w := d.marks(t)
	l, f, qk, lv := tagKeys(t)
	v, err := d.runReplicated(ctx, acquireScript, []string{l, f, qk, lv, e, w},
		req.Token, ttl, d.args.fenceTTLFor(fenceTTL), d.args.id, q, d.args.live, d.restartWait(ttl))
	if errors.Is(err, ErrReplicas) {
		_, _ = d.Release(ctx, req.Key, req.Token) // whether it took the lock or not
	}
	if err != nil {
		return drivers.AcquireResult{}, fmt.Errorf("redis: acquire: %w", err)
	}
	var flag, n int64
	switch r := v.(type) {
	case int64: // the common path's reply: the fence
		flag, n = 1, r
	case []any:
		if len(r) != 2 {
			return drivers.AcquireResult{}, fmt.Errorf("redis: acquire: unexpected reply of %d values", len(r))
		}
		flag, _ = r[0].(int64)
		n, _ = r[1].(int64)
	default:
		return drivers.AcquireResult{}, fmt.Errorf("redis: acquire: unexpected reply %T", v)
	}
	if flag == 1 {
		if n <= 0 {
			return drivers.AcquireResult{}, fmt.Errorf("redis: acquire: bad fence %d", n)
		}
		return drivers.AcquireResult{Acquired: true, Fence: uint64(n)}, nil
	}
	res := drivers.AcquireResult{}
	if n > 0 {
		res.HolderTTL = time.Duration(n) * time.Millisecond
	}
	return res, nil
}

// Release deletes key if token holds it, in one round trip. When waiters
// are queued for key, the same script passes the lock on to the first live
// one (see queueLua).
func (d *Driver) Release(ctx context.Context, key, token string) (bool, error) {
	t := tag(key)
	v, err := d.run(ctx, releaseScript, d.lockKeys(t),
		token, d.args.prefix, key, d.args.live, d.args.fenceTTL)
	if err != nil {
		return false, fmt.Errorf("redis: release: %w", err)
	}
	n, _ := v.(int64)
	return n == 1, nil
}

// Handover passes key from token to next.Token, in one script, when no
// waiter queues for it; with waiters queued it releases it as Release
// does, passing it on to the first of them.
func (d *Driver) Handover(ctx context.Context, key, token string, next drivers.AcquireRequest) (bool, drivers.AcquireResult, error) {
	if next.TTL <= 0 {
		return false, drivers.AcquireResult{}, fmt.Errorf("redis: ttl %v must be positive", next.TTL)
	}
	v, err := d.runReplicated(ctx, handoverScript, d.lockKeys(tag(key)),
		token, d.args.prefix, key, d.args.live, d.args.fenceTTL, next.Token, d.longest.see(next.TTL))
	a, ok := v.([]any)
	ok = ok && len(a) == 2
	var flag, n int64
	if ok {
		flag, _ = a[0].(int64)
		n, _ = a[1].(int64)
	}
	switch {
	case errors.Is(err, ErrReplicas) && ok && flag == 0:
		// token did not hold it: the script wrote nothing, and the
		// replicas that lag behind lag behind others' writes
		return false, drivers.AcquireResult{}, nil
	case errors.Is(err, ErrReplicas):
		_, _ = d.Release(ctx, key, next.Token)
		return true, drivers.AcquireResult{}, fmt.Errorf("redis: handover: %w", err)
	case err != nil:
		return false, drivers.AcquireResult{}, fmt.Errorf("redis: handover: %w", err)
	case !ok:
		return false, drivers.AcquireResult{}, fmt.Errorf("redis: handover: unexpected reply %T", v)
	}
	switch {
	case flag == 2 && n <= 0:
		return true, drivers.AcquireResult{}, fmt.Errorf("redis: handover: bad fence %d", n)
	case flag == 2:
		return true, drivers.AcquireResult{Acquired: true, Fence: uint64(n)}, nil
	}
	return flag == 1, drivers.AcquireResult{}, nil
}

// leave ends a waiting attempt for req that got no lock: no release will
// hand it the lock after this. If one did meanwhile, leave returns the
// lock as acquired, or with release set releases it (passing it on) and
// returns not acquired. release says the call ended for good: the waiter
// also leaves the queue (else it keeps its place for its next attempt).
// With gated false it runs past the health gate.
func (d *Driver) leave(ctx context.Context, req drivers.AcquireRequest, release, gated bool) (drivers.AcquireResult, error) {
	t := tag(req.Key)
	r := "0"
	if release {
		r = "1"
	}
	run := d.exec
	if gated {
		run = d.run
	}
	v, err := run(ctx, leaveScript, d.lockKeys(t),
		req.Token, d.args.prefix, req.Key, d.args.live, d.args.fenceTTL, d.args.id, r)
	if err != nil {
		return drivers.AcquireResult{}, fmt.Errorf("redis: acquire: leaving the queue: %w", err)
	}
	a, ok := v.([]any)
	if !ok || len(a) != 2 {
		return drivers.AcquireResult{}, fmt.Errorf("redis: acquire: leaving the queue: unexpected reply %T", v)
	}
	if flag, _ := a[0].(int64); flag == 1 {
		n, _ := a[1].(int64)
		if n <= 0 {
			return drivers.AcquireResult{}, fmt.Errorf("redis: acquire: bad fence %d", n)
		}
		return drivers.AcquireResult{Acquired: true, Fence: uint64(n)}, nil
	}
	return drivers.AcquireResult{}, nil
}

// Extend sets key's ttl from now (server clock) if token holds it.
func (d *Driver) Extend(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	if ttl <= 0 {
		return false, fmt.Errorf("redis: extend: ttl must be positive, got %v", ttl)
	}
	v, err := d.runReplicated(ctx, extendScript, []string{lockKey(key)}, token, d.longest.see(ttl))
	if err != nil {
		return false, fmt.Errorf("redis: extend: %w", err)
	}
	n, _ := v.(int64)
	return n == 1, nil
}

// Inspect returns the holder's token, the lock's fence and its remaining
// ttl, or ok false when key is free.
func (d *Driver) Inspect(ctx context.Context, key string) (drivers.LockInfo, bool, error) {
	v, err := d.run(ctx, inspectScript, []string{lockKey(key), fenceKey(key)})
	if err != nil {
		return drivers.LockInfo{}, false, fmt.Errorf("redis: inspect: %w", err)
	}
	if v == nil {
		return drivers.LockInfo{}, false, nil
	}
	r, ok := v.([]any)
	if !ok || len(r) != 3 {
		return drivers.LockInfo{}, false, fmt.Errorf("redis: inspect: unexpected reply %T", v)
	}
	info := drivers.LockInfo{}
	info.Token, _ = r[0].(string)
	fs, _ := r[1].(string)
	if info.Fence, err = strconv.ParseUint(fs, 10, 64); err != nil {
		return drivers.LockInfo{}, false, fmt.Errorf("redis: inspect: bad fence counter: %w", err)
	}
	if ms, _ := r[2].(int64); ms > 0 {
		info.TTL = time.Duration(ms) * time.Millisecond
	}
	return info, true, nil
}

// lockKeys are the keys of the scripts that may pass a lock on: the lock's
// keys (t is its tag), its epoch marker (for the fence floor) and the
// marker's wait key (no hand-off during the wait).
func (d *Driver) lockKeys(t string) []string {
	e, w := d.marks(t)
	l, f, q, lv := tagKeys(t)
	return []string{l, f, q, lv, e, w}
}
