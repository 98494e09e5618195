package etcd

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// errLeaseGone reports a lease the cluster no longer has: it expired (or
// was revoked) and every key on it is deleted.
var errLeaseGone = errors.New("etcd: lease expired")

// lease is one etcd lease of the driver, carrying the keys of every lock
// (held or waited for) with the same ttl class.
type lease struct {
	id  clientv3.LeaseID
	ttl time.Duration // as granted

	mu        sync.Mutex
	refreshed time.Time // when the last successful grant or keep-alive was sent
	gone      bool
}

// leases are the driver's leases by ttl class (whole seconds).
type leases struct {
	mu     sync.Mutex
	byTTL  map[int64]*lease
	closed bool         // taken by close: no lease is granted any more
	gone   func(*lease) // told of a lease found gone (Driver.leaseGone)
}

// MinTTL is the shortest lock ttl the driver serves
// (drivers.Features.MinTTL): etcd counts leases in whole seconds, and the
// driver's lease for a ttl is that ttl rounded up to seconds plus one
// (leaseSeconds), so a lock whose holder died stays in the store for two
// seconds with any ttl up to a second. A shorter ttl would not free it any
// sooner; it would only make the component renew more often and declare
// the lock lost after a shorter stall of the keep-alives.
const MinTTL = time.Second

// leaseSeconds is the lease ttl for a lock ttl: rounded up to whole seconds
// (etcd's unit), plus one, so that a lease refreshed up to a second ago
// still outlives a lock taken now; the cluster may raise it to its minimum
// (1.5 election timeouts).
func leaseSeconds(ttl time.Duration) int64 {
	return int64((ttl+time.Second-1)/time.Second) + 1
}

// get returns the live lease of ttl's class, granting one when there is
// none (or it is gone), and refreshing it first when it might expire within
// ttl: a key put on it now stays at least ttl in the store.
func (ls *leases) get(ctx context.Context, cli *clientv3.Client, ttl time.Duration) (*lease, error) {
	return ls.lease(ctx, cli, ttl, true)
}

// class returns the live lease of ttl's class, granting one when there is
// none (or it is gone), without refreshing it: for a caller that renews it
// next.
func (ls *leases) class(ctx context.Context, cli *clientv3.Client, ttl time.Duration) (*lease, error) {
	return ls.lease(ctx, cli, ttl, false)
}

func (ls *leases) lease(ctx context.Context, cli *clientv3.Client, ttl time.Duration, fresh bool) (*lease, error) {
	sec := leaseSeconds(ttl)
	ls.mu.Lock()
	l := ls.byTTL[sec]
	ls.mu.Unlock()
	if fresh && l != nil && l.remaining() < ttl {
		if err := ls.keepAlive(ctx, cli, l); err != nil && !errors.Is(err, errLeaseGone) {
			return nil, err
		}
	}
	if l != nil && !l.isGone() {
		return l, nil
	}
	return ls.grant(ctx, cli, sec, l)
}

// grant grants a lease of sec seconds in place of old (nil or gone).
func (ls *leases) grant(ctx context.Context, cli *clientv3.Client, sec int64, old *lease) (*lease, error) {
	sent := time.Now()
	resp, err := cli.Grant(ctx, sec)
	if err != nil {
		return nil, err
	}
	l := &lease{id: resp.ID, ttl: time.Duration(resp.TTL) * time.Second, refreshed: sent}
	ls.mu.Lock()
	if ls.closed { // Close took the leases while this one was granted
		ls.mu.Unlock()
		_, _ = cli.Revoke(ctx, l.id)
		return nil, ErrClosed
	}
	if cur := ls.byTTL[sec]; cur != old && cur != nil && !cur.isGone() {
		ls.mu.Unlock() // another call granted one first: ours goes
		_, _ = cli.Revoke(ctx, l.id)
		return cur, nil
	}
	ls.byTTL[sec] = l
	ls.mu.Unlock()
	return l, nil
}

// lost handles l found gone: through gone when set, else by forgetting it.
func (ls *leases) lost(l *lease) {
	if ls.gone != nil {
		ls.gone(l)
		return
	}
	l.setGone()
	ls.drop(l)
}

// drop forgets l when it is gone, so that the next get grants a new one.
func (ls *leases) drop(l *lease) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for k, cur := range ls.byTTL {
		if cur == l {
			delete(ls.byTTL, k)
		}
	}
}

// close returns every lease and refuses new ones from then on: a grant
// under way revokes its lease and fails with ErrClosed, so that no call
// racing with Close puts a key on a lease Close does not revoke.
func (ls *leases) close() []*lease {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.closed = true
	all := slices.Collect(maps.Values(ls.byTTL))
	clear(ls.byTTL)
	return all
}

// revoke revokes the leases all, deleting the driver's keys.
func revoke(ctx context.Context, cli *clientv3.Client, all []*lease) error {
	var errs []error
	for _, l := range all {
		l.setGone()
		if _, err := cli.Revoke(ctx, l.id); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// keepAlive renews l once. It returns errLeaseGone when the cluster no
// longer has it (and tells ls.gone).
func (ls *leases) keepAlive(ctx context.Context, cli *clientv3.Client, l *lease) error {
	sent := time.Now()
	resp, err := cli.KeepAliveOnce(ctx, l.id)
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound) || (err == nil && resp.TTL <= 0):
		ls.lost(l)
		return errLeaseGone
	case err != nil:
		return err
	}
	l.mu.Lock()
	if sent.After(l.refreshed) {
		l.refreshed = sent
	}
	l.mu.Unlock()
	return nil
}

// remaining is how long l lives at least without another keep-alive.
func (l *lease) remaining() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gone {
		return 0
	}
	return time.Until(l.refreshed.Add(l.ttl))
}

func (l *lease) isGone() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gone
}

func (l *lease) setGone() {
	l.mu.Lock()
	l.gone = true
	l.mu.Unlock()
}
