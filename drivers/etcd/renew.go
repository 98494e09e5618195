package etcd

import (
	"context"
	"errors"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mutexfx/mutexfx/drivers"
)

// moveConcurrency bounds the transactions of one Renew that move locks to
// another lease.
const moveConcurrency = 16

// renewal is one lock of a Renew batch that this driver holds.
type renewal struct {
	i   int // index in the batch
	e   *entry
	rev int64
	old *lease // the lease the key is on
	to  *lease // the lease of the batch's ttl class
}

// Renew renews every lease of the batch with one keep-alive request per
// etcd lease (one per ttl class), however many locks it carries, then
// checks in one request per etcd lease that each lock's key is still on it
// (a key missing from it but still in the store is put back on it).
// A lock whose ttl changed moves to its new class's lease first (one
// transaction each, after its old lease was renewed, several at once); a
// lock of another driver is extended on its own.
func (d *Driver) Renew(ctx context.Context, batch []drivers.Lease) []drivers.RenewResult {
	cli, cctx, done, err := d.call(ctx)
	if err != nil {
		return drivers.RenewFailed(len(batch), err)
	}
	res := make([]drivers.RenewResult, len(batch))
	defer done()
	var rs []renewal
	defer func() {
		for _, r := range rs {
			d.unuse(r.e)
		}
	}()
	for i, b := range batch {
		e := d.find(b.Key)
		if e == nil {
			res[i].Held, res[i].Err = d.extendByToken(cctx, cli, b.Key, b.Token, b.TTL)
			continue
		}
		r := renewal{i: i, e: e}
		if err := e.mu.lock(cctx); err != nil {
			res[i].Err = d.closedErr(err)
			d.unuse(e)
			continue
		}
		if e.held && e.token == b.Token {
			r.rev, r.old = e.rev, e.lease
		}
		e.mu.unlock()
		if r.rev == 0 {
			d.unuse(e)
			continue
		}
		if r.to, err = d.leases.class(cctx, cli, b.TTL); err != nil {
			res[i].Err = d.closedErr(err)
			d.unuse(e)
			continue
		}
		rs = append(rs, r)
	}
	d.move(cctx, cli, rs, res)
	groups := map[*lease][]renewal{}
	for _, r := range rs {
		if res[r.i].Err == nil && r.rev != 0 {
			groups[r.to] = append(groups[r.to], r)
		}
	}
	var wg sync.WaitGroup
	for l, group := range groups {
		wg.Go(func() {
			held, err := d.renewLease(cctx, cli, l)
			for _, r := range group {
				res[r.i].Err = err
				switch tok := batch[r.i].Token; {
				case err != nil:
				case held == nil: // the lease is gone, and its keys
					d.forgetKey(cctx, r.e, r.rev)
				case !held[r.e.wk]:
					res[r.i].Held, res[r.i].Err = d.reattach(cctx, cli, r.e, r.rev, tok, l)
				default:
					res[r.i].Held, res[r.i].Err = d.still(cctx, r.e, r.rev, tok)
				}
			}
		})
	}
	wg.Wait()
	return res
}

// move puts the keys of rs that are on another lease than their class's
// onto it, after renewing each old lease once (so that its keys do not
// expire while the moves are under way). A key found gone gets rev 0.
func (d *Driver) move(ctx context.Context, cli *clientv3.Client, rs []renewal, res []drivers.RenewResult) {
	olds := map[*lease]bool{}
	for _, r := range rs {
		if r.old != r.to && r.old != nil {
			olds[r.old] = true
		}
	}
	for l := range olds {
		_ = d.leases.keepAlive(ctx, cli, l) // a lease gone fails its moves
	}
	sem := make(chan struct{}, moveConcurrency)
	var wg sync.WaitGroup
	for k := range rs {
		r := &rs[k]
		if r.old == r.to {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := r.e.mu.lock(ctx); err != nil {
				res[r.i].Err = d.closedErr(err)
				return
			}
			defer r.e.mu.unlock()
			if r.e.rev != r.rev || !r.e.held {
				r.rev = 0
				return
			}
			ok, err := d.moveTo(ctx, cli, r.e, r.to)
			switch {
			case err != nil:
				res[r.i].Err = err
			case !ok:
				r.rev = 0
			}
		})
	}
	wg.Wait()
}

// renewLease renews l once and returns the keys still on it: nil when l
// is gone.
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

// still reports whether e's key found on its lease is still the one
// created at rev for token. The lease answers with key names only, and a
// key deleted (by an operator's force release) and put again by this
// driver for another token while the renewal ran is on the lease as well.
// The driver creates its key only in a hold of e.mu that also sets e.rev
// to the new key's create revision, so after the lease's answer this
// check is exact.
func (d *Driver) still(ctx context.Context, e *entry, rev int64, token string) (bool, error) {
	if err := e.mu.lock(ctx); err != nil {
		return false, d.closedErr(err)
	}
	defer e.mu.unlock()
	return e.held && e.rev == rev && e.token == token, nil
}

// reattach handles e's key, created at rev for token, missing from l, the
// lease it was on, which was just renewed: the key is gone (deleted), or
// on another lease, where a move whose answer was lost put it (an Extend
// to another ttl that failed, then renewals with the earlier ttl). It
// reports whether the key is there, put back on l. Counted gone, the key
// would stay in the store, unknown to the driver, holding the lock for as
// long as that other lease lives.
func (d *Driver) reattach(ctx context.Context, cli *clientv3.Client, e *entry, rev int64, token string, l *lease) (bool, error) {
	if err := e.mu.lock(ctx); err != nil {
		return false, d.closedErr(err)
	}
	defer e.mu.unlock()
	if !e.held || e.rev != rev || e.token != token {
		return false, nil
	}
	e.lease = nil // not on l: moveTo puts it there
	return d.moveTo(ctx, cli, e, l)
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
