package etcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mutexfx/mutexfx/drivers"
)

// find returns key's entry counted as in use (unuse ends it), or nil when
// the driver has none.
func (d *Driver) find(key string) *entry {
	d.mu.Lock()
	defer d.mu.Unlock()
	e := d.entries[key]
	if e != nil && !d.closed {
		e.users++
		e.stopLinger()
		return e
	}
	return nil
}

// own runs fn with e.mu held when this driver has key's entry for token
// (held when held is set, else held or waiting); it reports whether it
// did.
func (d *Driver) own(ctx context.Context, key, token string, held bool, fn func(*entry)) (bool, error) {
	e := d.find(key)
	if e == nil {
		return false, nil
	}
	defer d.unuse(e)
	if err := e.mu.lock(ctx); err != nil {
		return false, d.closedErr(err)
	}
	defer e.mu.unlock()
	if e.rev == 0 || e.token != token || (held && !e.held) {
		return false, nil
	}
	fn(e)
	return true, nil
}

// Release deletes the token's key from the lock's queue, in a transaction
// guarded by the key's create revision, and reports whether that key held
// the lock. A token of another driver is looked up in the queue first.
func (d *Driver) Release(ctx context.Context, key, token string) (bool, error) {
	cli, cctx, done, err := d.call(ctx)
	if err != nil {
		return false, err
	}
	defer done()
	var first bool
	var derr error // dequeue's: own's own result must not overwrite it
	mine, err := d.own(cctx, key, token, false, func(e *entry) { first, derr = d.dequeue(cctx, e) })
	if err == nil {
		err = derr
	}
	if mine || err != nil {
		return first, err
	}
	kv, err := d.byToken(cctx, cli, key, token)
	if err != nil || kv == nil {
		return false, err
	}
	resp, err := cli.Txn(cctx).
		If(clientv3.Compare(clientv3.CreateRevision(string(kv.Key)), "=", kv.CreateRevision),
			clientv3.Compare(clientv3.Value(string(kv.Key)), "=", token)).
		Then(headOp(d.queue(key)), clientv3.OpDelete(string(kv.Key))).
		Commit()
	if err != nil {
		return false, d.closedErr(err)
	}
	return resp.Succeeded && isHead(resp.Responses[0], string(kv.Key)), nil
}

// byToken returns the key of key's queue whose value is token, or nil.
func (d *Driver) byToken(ctx context.Context, cli *clientv3.Client, key, token string) (*mvccpb.KeyValue, error) {
	resp, err := cli.Get(ctx, d.queue(key), clientv3.WithPrefix())
	if err != nil {
		return nil, d.closedErr(err)
	}
	for _, kv := range resp.Kvs {
		if string(kv.Value) == token {
			return kv, nil
		}
	}
	return nil, nil
}

// Extend renews the lease that carries the lock (moving the lock to the
// lease of ttl's class first when its ttl changed) and checks that the
// lock's key is still there.
func (d *Driver) Extend(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	cli, cctx, done, err := d.call(ctx)
	if err != nil {
		return false, err
	}
	defer done()
	var held bool
	var eerr error // extendOwn's: own's own result must not overwrite it
	mine, err := d.own(cctx, key, token, true, func(e *entry) { held, eerr = d.extendOwn(cctx, cli, e, ttl) })
	if err == nil {
		err = eerr
	}
	if mine || err != nil {
		return held, err
	}
	return d.extendByToken(cctx, cli, key, token, ttl)
}

// extendOwn extends a lock of this driver; e.mu held. The lease of ttl's
// class is renewed first, then the key is checked (and moved onto that
// lease when it is on another). That lease, when not the key's, may have
// lapsed unused (its locks released): then a new one is granted.
func (d *Driver) extendOwn(ctx context.Context, cli *clientv3.Client, e *entry, ttl time.Duration) (bool, error) {
	for range 3 {
		l, err := d.leases.class(ctx, cli, ttl)
		if err != nil {
			return false, d.closedErr(err)
		}
		err = d.leases.keepAlive(ctx, cli, l)
		switch {
		case err == nil:
			return d.moveTo(ctx, cli, e, l)
		case e.lease == l:
			return d.leaseFailed(e, l, err)
		case !errors.Is(err, errLeaseGone): // (a lease gone is dropped: class grants anew)
			return false, d.closedErr(err)
		}
	}
	return false, errLeaseGone
}

// moveTo checks that e's key is still there and puts it on l when it is on
// another lease; e.mu held. It reports whether the key is there.
func (d *Driver) moveTo(ctx context.Context, cli *clientv3.Client, e *entry, l *lease) (bool, error) {
	txn := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(e.wk), "=", e.rev))
	if e.lease != l {
		txn = txn.Then(clientv3.OpPut(e.wk, e.token, clientv3.WithLease(l.id)))
	}
	resp, err := txn.Commit()
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		d.leaseGone(l) // the next call puts the key on a new lease
	}
	if err != nil {
		return false, d.closedErr(err)
	}
	if !resp.Succeeded {
		e.rev, e.held, e.lease = 0, false, nil
		return false, nil
	}
	e.lease = l
	return true, nil
}

// leaseFailed handles a failed keep-alive of l, which carries e: a lease
// gone loses the lock, another error leaves it unknown.
func (d *Driver) leaseFailed(e *entry, l *lease, err error) (bool, error) {
	if errors.Is(err, errLeaseGone) { // leaseGone skipped e: its mutex is ours
		e.rev, e.held, e.lease = 0, false, nil
		return false, nil
	}
	return false, d.closedErr(err)
}

// extendByToken extends a lock of another driver: its key must be first
// in line; its lease is renewed. That lease is the other driver's, which
// only it can lengthen: a ttl longer than the lease keeps the lock is an
// error, not held (the lease is renewed all the same).
func (d *Driver) extendByToken(ctx context.Context, cli *clientv3.Client, key, token string, ttl time.Duration) (bool, error) {
	resp, err := cli.Get(ctx, d.queue(key), clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1))
	if err != nil {
		return false, d.closedErr(err)
	}
	if len(resp.Kvs) == 0 || string(resp.Kvs[0].Value) != token {
		return false, nil
	}
	ka, err := cli.KeepAliveOnce(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound) || (err == nil && ka.TTL <= 0):
		return false, nil // the lease, and the key on it, are gone
	case err != nil:
		return false, d.closedErr(err) // not known: the lock may still be held
	case lockTTL(ka.TTL) < ttl:
		return false, fmt.Errorf("etcd: %q is held on another driver's lease, of %d s: only that driver extends it to %v", key, ka.TTL, ttl)
	}
	return true, nil
}

// Inspect returns the lock's holder: the first key of its queue, whose
// create revision is the fence. TTL is its lease's remaining time less the
// second the driver adds to every lease (see leaseSeconds).
func (d *Driver) Inspect(ctx context.Context, key string) (drivers.LockInfo, bool, error) {
	var info drivers.LockInfo
	cli, cctx, done, err := d.call(ctx)
	if err != nil {
		return info, false, err
	}
	defer done()
	resp, err := cli.Get(cctx, d.queue(key), clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1))
	if err != nil {
		return info, false, d.closedErr(err)
	}
	if len(resp.Kvs) == 0 {
		return info, false, nil
	}
	kv := resp.Kvs[0]
	info.Token, info.Fence = string(kv.Value), uint64(kv.CreateRevision)
	tr, err := cli.TimeToLive(cctx, clientv3.LeaseID(kv.Lease))
	if err != nil {
		return info, false, d.closedErr(err)
	}
	if tr.TTL <= 0 {
		return drivers.LockInfo{}, false, nil
	}
	info.TTL = lockTTL(tr.TTL)
	return info, true, nil
}
