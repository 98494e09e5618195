package etcd

import (
	"context"
	"net/url"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// entry is what the driver knows of its own key in one lock's queue. Only
// this driver writes that key (its name ends with the driver's id); others
// may delete it (a release by token, an expired lease).
type entry struct {
	key string // the lock key
	wk  string // the driver's etcd key in the lock's queue

	// Guarded by Driver.mu.
	users  int    // calls at work on the entry
	gen    uint64 // counts attempts, so that a linger timer sees newer ones
	linger *time.Timer

	// Guarded by mu, which is held across the store call that changes them.
	mu    chanMutex
	token string // the token of the holder, or of the latest attempt
	rev   int64  // create revision of wk; 0 when the driver has no key
	lease *lease // the lease wk is on
	held  bool   // wk was first in line for token
	// spent: wk held a lock whose release did not reach the store; its
	// create revision was that lock's fence, so it is deleted, never
	// taken again.
	spent bool
	// lost: the token of an attempt whose put of a new key (rev 0) got
	// no answer; the store may hold wk with that value, on a lease the
	// driver's other locks keep alive. deleteLost deletes wk only while
	// its value is that token: a later attempt's key holds its own.
	lost string
}

// chanMutex is a mutex whose Lock gives up when ctx ends (a call that
// queues behind one stuck on a stalled link).
type chanMutex chan struct{}

func (m chanMutex) lock(ctx context.Context) error {
	select {
	case m <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m chanMutex) unlock() { <-m }

// queue returns the prefix of key's queue: KeyPrefix, then key
// path-escaped (so that it holds no "/" and no two keys' queues overlap),
// then "/".
func (d *Driver) queue(key string) string {
	return d.set.prefix + url.PathEscape(key) + "/"
}

// use returns key's entry, created if missing, counted as in use until
// unuse.
func (d *Driver) use(key string) (*entry, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, ErrClosed
	}
	e := d.entries[key]
	if e == nil {
		e = &entry{key: key, wk: d.queue(key) + d.id, mu: make(chanMutex, 1)}
		d.entries[key] = e
	}
	e.users++
	e.gen++
	e.stopLinger()
	return e, nil
}

// unuse ends a use of e. An entry with no key is forgotten; one that
// waits with nobody at work on it gets a linger timer, which removes the
// key from the queue unless another attempt comes first.
func (d *Driver) unuse(e *entry) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e.users--
	if e.users > 0 {
		return
	}
	// Every call locks e.mu within a use; with none at work, only
	// leaseGone writes e's fields, and it holds Driver.mu while it does.
	rev, held := e.rev, e.held
	switch {
	case rev == 0 && e.lost == "":
		if d.entries[e.key] == e {
			delete(d.entries, e.key)
		}
	case !held && !d.closed:
		gen := e.gen
		e.linger = time.AfterFunc(d.set.linger, func() { d.expireWaiter(e, gen) })
	}
}

// stopLinger stops e's linger timer; Driver.mu held.
func (e *entry) stopLinger() {
	if e.linger != nil {
		e.linger.Stop()
		e.linger = nil
	}
}

// expireWaiter removes e's key from its queue when no attempt came since
// the one numbered gen.
func (d *Driver) expireWaiter(e *entry, gen uint64) {
	d.mu.Lock()
	if d.closed || e.gen != gen || e.users > 0 {
		d.mu.Unlock()
		return
	}
	e.users++
	d.wg.Add(1)
	d.mu.Unlock()
	defer d.wg.Done()
	defer d.unuse(e)
	ctx, cancel := context.WithTimeout(d.ctx, 5*time.Second)
	defer cancel()
	if e.mu.lock(ctx) != nil {
		return
	}
	defer e.mu.unlock()
	if e.lost != "" && d.deleteLost(ctx, e) != nil {
		return
	}
	if !e.held && e.rev != 0 {
		_, _ = d.dequeue(ctx, e)
	}
}

// dequeue deletes e's key if it is still the one the driver put; e.mu
// held. It reports whether the key was first in line (held) when deleted.
// When the store does not answer, a held key is spent: no longer held by
// anyone, deleted by the linger timer once the entry is unused, again at
// every linger until the store answers, or by the next attempt before it
// puts a key of its own. Else a released lock's key would stay on a lease
// that the driver's other locks keep alive, and nobody could take the
// lock while they are held.
func (d *Driver) dequeue(ctx context.Context, e *entry) (bool, error) {
	cli, cctx, done, err := d.call(ctx)
	if err != nil {
		e.spend()
		return false, err
	}
	defer done()
	resp, err := cli.Txn(cctx).
		If(clientv3.Compare(clientv3.CreateRevision(e.wk), "=", e.rev)).
		Then(headOp(d.queue(e.key)), clientv3.OpDelete(e.wk)).
		Commit()
	if err != nil {
		e.spend()
		return false, d.closedErr(err)
	}
	first := resp.Succeeded && isHead(resp.Responses[0], e.wk)
	e.rev, e.held, e.lease, e.spent = 0, false, nil, false
	return first, nil
}

// deleteLost deletes wk if its value is e.lost, the token of an attempt
// whose put got no answer; e.mu held. Once the store answers, that put is
// known not to be there (any more). The guard is the value, never "any
// key at wk": a delete whose answer is lost may be applied later still,
// after a later attempt put its own key there, which carries its own
// token.
func (d *Driver) deleteLost(ctx context.Context, e *entry) error {
	cli, cctx, done, err := d.call(ctx)
	if err != nil {
		return err
	}
	defer done()
	_, err = cli.Txn(cctx).
		If(clientv3.Compare(clientv3.Value(e.wk), "=", e.lost)).
		Then(clientv3.OpDelete(e.wk)).
		Commit()
	if err != nil {
		return d.closedErr(err)
	}
	e.lost = ""
	return nil
}

// spend marks a held key whose delete failed as spent (see dequeue); e.mu
// held.
func (e *entry) spend() {
	if e.held {
		e.held, e.spent = false, true
	}
}

// headOp gets the first key of the queue q: the holder.
func headOp(q string) clientv3.Op {
	return clientv3.OpGet(q, clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1))
}

// isHead reports whether the response of a headOp names wk.
func isHead(r *pb.ResponseOp, wk string) bool {
	kvs := r.GetResponseRange().GetKvs()
	return len(kvs) > 0 && string(kvs[0].Key) == wk
}
