package etcd

import (
	"context"
	"errors"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mutexfx/mutexfx/drivers"
)

// renewal is one lock of a Renew batch that this driver holds.
type renewal struct {
	i   int // index in the batch
	e   *entry
	rev int64
}

// Renew renews every lease of the batch with one keep-alive request per
// etcd lease (one per ttl class), however many locks it carries, then
// checks in one request per etcd lease that each lock's key is still on it.
// A lock whose ttl changed moves to its new class's lease first (one
// transaction each); a lock of another driver is extended on its own.
func (d *Driver) Renew(ctx context.Context, batch []drivers.Lease) []drivers.RenewResult {
	res := make([]drivers.RenewResult, len(batch))
	cli, cctx, done, err := d.call(ctx)
	if err != nil {
		for i := range res {
			res[i].Err = err
		}
		return res
	}
	defer done()
	groups := map[*lease][]renewal{}
	for i, b := range batch {
		e := d.find(b.Key)
		if e == nil {
			res[i].Held, res[i].Err = d.extendByToken(cctx, cli, b.Key, b.Token)
			continue
		}
		l, rev, err := d.renewalLease(cctx, cli, e, b)
		switch {
		case err != nil:
			res[i].Err = err
		case l != nil:
			groups[l] = append(groups[l], renewal{i: i, e: e, rev: rev})
			continue // unuse after the check
		}
		d.unuse(e)
	}
	var wg sync.WaitGroup
	for l, rs := range groups {
		wg.Go(func() {
			defer func() {
				for _, r := range rs {
					d.unuse(r.e)
				}
			}()
			held, err := d.renewLease(cctx, cli, l)
			for _, r := range rs {
				res[r.i].Held, res[r.i].Err = held[r.e.wk], err
				if err == nil && !held[r.e.wk] {
					d.forgetKey(cctx, r.e, r.rev)
				}
			}
		})
	}
	wg.Wait()
	return res
}

// renewalLease returns the lease of b's class that e's key is on (moved
// there when it was on another), with the key's create revision, or a nil
// lease when e does not hold the lock for b.Token (lost or never held).
func (d *Driver) renewalLease(ctx context.Context, cli *clientv3.Client, e *entry, b drivers.Lease) (*lease, int64, error) {
	if err := e.mu.lock(ctx); err != nil {
		return nil, 0, d.closedErr(err)
	}
	defer e.mu.unlock()
	if !e.held || e.token != b.Token {
		return nil, 0, nil
	}
	l, err := d.leases.get(ctx, cli, b.TTL)
	if err != nil {
		return nil, 0, d.closedErr(err)
	}
	if e.lease != l {
		resp, err := cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(e.wk), "=", e.rev)).
			Then(clientv3.OpPut(e.wk, e.token, clientv3.WithLease(l.id))).
			Commit()
		if err != nil {
			return nil, 0, d.closedErr(err)
		}
		if !resp.Succeeded {
			e.rev, e.held, e.lease = 0, false, nil
			return nil, 0, nil
		}
		e.lease = l
	}
	return l, e.rev, nil
}

// renewLease renews l once and returns the keys still on it.
func (d *Driver) renewLease(ctx context.Context, cli *clientv3.Client, l *lease) (map[string]bool, error) {
	if err := d.leases.keepAlive(ctx, cli, l); err != nil {
		if errors.Is(err, errLeaseGone) {
			return nil, nil
		}
		return nil, d.closedErr(err)
	}
	resp, err := cli.TimeToLive(ctx, l.id, clientv3.WithAttachedKeys())
	if err != nil {
		return nil, d.closedErr(err)
	}
	keys := make(map[string]bool, len(resp.Keys))
	for _, k := range resp.Keys {
		keys[string(k)] = true
	}
	return keys, nil
}

// forgetKey records that e's key, created at rev, is gone.
func (d *Driver) forgetKey(ctx context.Context, e *entry, rev int64) {
	if e.mu.lock(ctx) != nil {
		return
	}
	if e.rev == rev {
		e.rev, e.held, e.lease = 0, false, nil
	}
	e.mu.unlock()
}
