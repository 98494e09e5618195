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

// Acquire puts the driver's key in the lock's queue (or keeps the place it
// has there, for the new token) and takes the lock when that key is first
// in line. Otherwise, with req.Wait, it watches the key just before its
// own until that one is deleted or the wait ends; the place is kept for the
// next attempt for WaiterLinger. One transaction when the lock is free.
// Errors that retrying cannot cure (authentication, permissions) match
// drivers.ErrPermanent.
func (d *Driver) Acquire(ctx context.Context, req drivers.AcquireRequest) (res drivers.AcquireResult, err error) {
	defer func() { err = permanent(err) }()
	e, err := d.use(req.Key)
	if err != nil {
		return res, err
	}
	defer d.unuse(e)
	cli, cctx, done, err := d.call(ctx)
	if err != nil {
		return res, err
	}
	defer done()
	if err := e.mu.lock(cctx); err != nil {
		return res, d.closedErr(err)
	}
	res, p, err := d.enqueue(cctx, cli, e, req)
	rev := e.rev
	e.mu.unlock()
	if err != nil || res.Acquired || p.watchRev == 0 { // watchRev 0: held by this driver for another token
		return res, d.closedErr(err)
	}
	if req.Wait <= 0 {
		res.HolderTTL = holderTTL(cctx, cli, p.headLease)
		return res, d.giveUp(cctx, e, req.Token, rev)
	}
	return d.wait(cctx, cli, e, req, rev, p.pred, p.watchRev)
}

// place is where an attempt that did not get the lock stands in its queue.
type place struct {
	pred      string           // the key just before
	watchRev  int64            // the revision the queue was read at; 0: do not wait
	headLease clientv3.LeaseID // the holder's lease
}

// holderTTL returns the remaining ttl of the lock on lease id (as Inspect
// reports it), or 0 when unknown.
func holderTTL(ctx context.Context, cli *clientv3.Client, id clientv3.LeaseID) time.Duration {
	if id == 0 {
		return 0
	}
	tr, err := cli.TimeToLive(ctx, id)
	if err != nil || tr.TTL <= 0 {
		return 0
	}
	return lockTTL(tr.TTL)
}

// lockTTL is the remaining ttl of a lock whose lease has sec seconds left:
// less the second the driver adds to every lease (see leaseSeconds).
func lockTTL(sec int64) time.Duration {
	return max(time.Duration(sec)*time.Second-time.Second, time.Millisecond)
}

// enqueue makes e's key the request's in the lock's queue and reports
// whether it is first; when not, it returns the key just before it and the
// revision its answer was read at. e.mu held.
func (d *Driver) enqueue(ctx context.Context, cli *clientv3.Client, e *entry, req drivers.AcquireRequest) (drivers.AcquireResult, place, error) {
	var res drivers.AcquireResult
	if e.spent { // its create revision was a fence: a new key, a new fence
		if _, err := d.dequeue(ctx, e); err != nil {
			return res, place{}, err
		}
	}
	if e.lost != "" { // a key put for a failed attempt: not this one's place
		if err := d.deleteLost(ctx, e); err != nil {
			return res, place{}, err
		}
	}
	if e.held {
		if e.token == req.Token { // a retried call that got it
			return drivers.AcquireResult{Acquired: true, Fence: uint64(e.rev)}, place{}, nil
		}
		// Held here by another token: unless lost since.
		resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(e.wk), "=", e.rev)).Commit()
		if err != nil {
			return res, place{}, err
		}
		if resp.Succeeded {
			return res, place{}, nil
		}
		e.rev, e.held, e.lease = 0, false, nil
	}
	q := d.queue(e.key)
	for range 4 {
		l, err := d.leases.get(ctx, cli, req.TTL)
		if err != nil {
			return res, place{}, err
		}
		pred := clientv3.OpGet(q, clientv3.WithPrefix(), clientv3.WithKeysOnly(),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(2))
		if e.rev != 0 {
			pred = predOp(q, e.rev)
		}
		resp, err := cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(e.wk), "=", e.rev)).
			Then(clientv3.OpPut(e.wk, req.Token, clientv3.WithLease(l.id)), headOp(q), pred).
			Else(clientv3.OpGet(e.wk, clientv3.WithKeysOnly())).
			Commit()
		switch {
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			d.leaseGone(l)
			continue
		case err != nil:
			if e.rev == 0 { // the store may have put the key: see deleteLost
				e.lost = req.Token
			}
			return res, place{}, err
		case !resp.Succeeded: // the key is not as the driver left it
			e.rev, e.lease = 0, nil
			if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
				if err := d.deleteUnknown(ctx, cli, e.wk, kvs[0].CreateRevision); err != nil {
					return res, place{}, err
				}
			}
			continue
		}
		e.token, e.lease = req.Token, l
		if e.rev == 0 {
			e.rev = resp.Header.Revision
		}
		if isHead(resp.Responses[1], e.wk) {
			e.held = true
			return drivers.AcquireResult{Acquired: true, Fence: uint64(e.rev)}, place{}, nil
		}
		p := place{watchRev: resp.Header.Revision}
		if kvs := resp.Responses[1].GetResponseRange().GetKvs(); len(kvs) > 0 {
			p.headLease = clientv3.LeaseID(kvs[0].Lease)
		}
		for _, kv := range resp.Responses[2].GetResponseRange().GetKvs() {
			if string(kv.Key) != e.wk {
				p.pred = string(kv.Key)
				break
			}
		}
		return res, p, nil
	}
	return res, place{}, fmt.Errorf("etcd: the queue key of %q kept changing", e.key)
}

// deleteUnknown deletes wk, created at rev, a key of the driver's that it
// does not know: one a put or a move put after its answer was lost, the
// driver having counted the key gone since. It is never taken over: its
// create revision may be the fence of a lock handed out already (and
// counted lost), which a new holder must not get again. Guarded by the
// create revision, a delete applied late spares a later key.
func (d *Driver) deleteUnknown(ctx context.Context, cli *clientv3.Client, wk string, rev int64) error {
	_, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(wk), "=", rev)).
		Then(clientv3.OpDelete(wk)).
		Commit()
	return err
}

// predOp gets the key of q created last before rev: the one a waiter at
// rev watches.
func predOp(q string, rev int64) clientv3.Op {
	return clientv3.OpGet(q, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithMaxCreateRev(rev-1),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(1))
}

// giveUp removes the place of an attempt that does not wait, unless a
// newer attempt took it over.
func (d *Driver) giveUp(ctx context.Context, e *entry, token string, rev int64) error {
	if err := e.mu.lock(ctx); err != nil {
		return d.closedErr(err)
	}
	defer e.mu.unlock()
	if e.token != token || e.rev != rev || e.held {
		return nil
	}
	_, err := d.dequeue(ctx, e)
	return err
}

// wait watches the key before e's (pred, from revision watchRev on) until
// e's key is first or req.Wait passes.
func (d *Driver) wait(ctx context.Context, cli *clientv3.Client, e *entry, req drivers.AcquireRequest, rev int64, pred string, watchRev int64) (drivers.AcquireResult, error) {
	var res drivers.AcquireResult
	wctx, cancel := context.WithTimeout(ctx, req.Wait)
	defer cancel()
	q := d.queue(e.key)
	for {
		if pred != "" {
			if err := waitDelete(wctx, cli, pred, watchRev); err != nil {
				switch {
				case ctx.Err() != nil:
					return res, d.closedErr(context.Cause(ctx))
				case wctx.Err() != nil:
					return res, nil // the wait is over; the place is kept
				}
				return res, err
			}
		}
		resp, err := cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(e.wk), "=", rev)).
			Then(headOp(q), predOp(q, rev)).
			Commit()
		if err != nil {
			return res, d.closedErr(err)
		}
		if !resp.Succeeded || isHead(resp.Responses[0], e.wk) {
			return d.settle(ctx, e, req.Token, rev, resp.Succeeded)
		}
		pred, watchRev = "", resp.Header.Revision
		if kvs := resp.Responses[1].GetResponseRange().GetKvs(); len(kvs) > 0 {
			pred = string(kvs[0].Key)
		}
		if wctx.Err() != nil {
			return res, nil
		}
	}
}

// settle records the outcome of a wait: e's key (created at rev) is first
// in line when exists, else it is gone. The lock is the attempt's only if
// no newer attempt took the place over.
func (d *Driver) settle(ctx context.Context, e *entry, token string, rev int64, exists bool) (drivers.AcquireResult, error) {
	var res drivers.AcquireResult
	if err := e.mu.lock(ctx); err != nil {
		return res, d.closedErr(err)
	}
	defer e.mu.unlock()
	switch {
	case e.rev != rev:
	case !exists:
		e.rev, e.held, e.lease = 0, false, nil
	case e.token == token && !e.held:
		e.held = true
		return drivers.AcquireResult{Acquired: true, Fence: uint64(rev)}, nil
	}
	return res, nil
}

// waitDelete returns when key is deleted after revision rev, or with ctx's
// error. A compacted revision returns at once (the caller looks again).
func waitDelete(ctx context.Context, cli *clientv3.Client, key string, rev int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for wr := range cli.Watch(wctx, key, clientv3.WithRev(rev+1), clientv3.WithFilterPut()) {
		if wr.CompactRevision != 0 {
			return nil
		}
		if err := wr.Err(); err != nil {
			return err
		}
		for _, ev := range wr.Events {
			if ev.Type == mvccpb.DELETE {
				return nil
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.New("etcd: watch ended")
}
