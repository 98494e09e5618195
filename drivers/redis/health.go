package redis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mutexfx/mutexfx/drivers/internal/kit"
	"github.com/mutexfx/mutexfx/internal/backoff"
)

// ErrUnavailable is returned at once, without a network call, while the
// server a call needs is reconnecting after a network error: the server
// (standalone or Sentinel), or in a Cluster the master of the key's slot
// (the other masters' keys work on). A probe pings that server in the
// background and clears the state when it answers. Calls thus fail fast
// instead of each waiting for a dial or read timeout.
var ErrUnavailable = errors.New("redis: unreachable, reconnecting")

// probeBackoff is the pause between two probes of a down server: the one
// retry policy, capped at 200 ms, as every call to the server fails until
// a probe finds it back.
var probeBackoff = backoff.Policy{Start: backoff.DefaultStart, Cap: 200 * time.Millisecond}

// probeTimeout bounds one probe (and so how long Close may wait for it).
const probeTimeout = time.Second

// health tracks whether the servers were reachable at their last call: the
// one server of a standalone or Sentinel client, or each Cluster master on
// its own, so that a dead master fails only the calls for its slots.
type health struct {
	d  *Driver
	cc *goredis.ClusterClient // nil unless Cluster
	// one is the server (standalone, Sentinel); in a Cluster, the client's
	// slot map while it cannot be loaded (no master known yet).
	one *node

	mu    sync.Mutex
	nodes map[string]*node // Cluster masters by address (see node for their pruning)

	reloaded atomic.Int64 // when a probe last asked for a new slot map (Unix ns)
}

// reloadInterval is how often, at most, the probes of down Cluster masters
// ask go-redis to load the slot map again.
const reloadInterval = time.Second

// node is the health of one server.
type node struct {
	h       *health
	addr    string // a Cluster master's address; "" for the one server
	down    atomic.Bool
	lastErr atomic.Pointer[string]
	up      kit.Gate // shut while down: waits end when the server answers again

	mu     sync.Mutex
	client *goredis.Client // a Cluster master's own client, pinged by the probe

	used time.Time // a Cluster master's last lookup by a call (h.mu)

	// replicas is the number of replicas the server had at the driver's
	// last new connection to it (INFO connected_slaves; see replicaWait).
	replicas atomic.Int64
	// counted says a connection to the server was opened (so replicas was
	// read, unless INFO was refused): until then the default MinReplicas
	// is not known (see evalReplicated).
	counted atomic.Bool
	// gen counts the times a Cluster master may have become another
	// server process: its connections found a new run_id (the slots it
	// checked are checked on that connection first: see newProcess), or
	// it answered again after a network error. A slot checked on an older
	// gen is checked again (see slotChecks).
	gen atomic.Uint64

	// runMu is held by a new connection that records a Cluster master's
	// run_id, across the checks a new one calls for (see newProcess).
	runMu sync.Mutex
	runID string // a Cluster master's run_id at the last new connection (runMu)
}

// pruneAfter is how long a Cluster master that is up may go unused before
// its node is dropped, when a master not seen before turns up: masters
// come and go with failovers and reshardings, and a node that is up holds
// nothing that a new one would not (see health.node).
const pruneAfter = 10 * time.Minute

func newHealth(d *Driver) *health {
	h := &health{d: d}
	h.cc, _ = d.client.(*goredis.ClusterClient)
	h.one = &node{h: h}
	return h
}

// gate returns the node of redisKey, or fails at once when the driver is
// closed or that node is reconnecting.
func (h *health) gate(ctx context.Context, redisKey string) (*node, error) {
	if h.d.isClosed() {
		return nil, ErrClosed
	}
	if h.cc != nil {
		if err := h.one.check(); err != nil { // no slot map yet
			return nil, err
		}
	}
	n, err := h.node(ctx, redisKey)
	if err != nil {
		return nil, err
	}
	return n, n.check()
}

// node returns the node serving redisKey: the one server, or in a Cluster
// the master of its slot as the client's slot map has it. A Cluster client
// that cannot load its slot map returns the error, observed by h.one, and
// h.one (never nil). A master seen for the first time gets a node, and the
// nodes of masters that are up and went unused for pruneAfter are dropped
// then, so that the map follows the cluster's masters instead of growing
// with every address it ever had; a down master's node stays until its
// probe ends.
func (h *health) node(ctx context.Context, redisKey string) (*node, error) {
	if h.cc == nil {
		return h.one, nil
	}
	c, err := h.cc.MasterForKey(ctx, redisKey)
	if err != nil {
		return h.one, h.one.observe(ctx, err)
	}
	n := h.at(c.Options().Addr)
	n.mu.Lock()
	n.client = c // go-redis makes a new one if the node left and came back
	n.mu.Unlock()
	return n, nil
}

// at returns the node of the Cluster master at addr, marked used now,
// creating it if it is new; then the nodes of masters that are up and went
// unused for pruneAfter are dropped.
func (h *health) at(addr string) *node {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.nodes[addr]
	if n == nil {
		if h.nodes == nil {
			h.nodes = map[string]*node{}
		}
		for a, old := range h.nodes {
			if !old.down.Load() && now.Sub(old.used) > pruneAfter {
				delete(h.nodes, a)
			}
		}
		n = &node{h: h, addr: addr}
		h.nodes[addr] = n
	}
	n.used = now
	return n
}

// check fails at once while the node is reconnecting.
func (n *node) check() error {
	if !n.down.Load() {
		return nil
	}
	at := ""
	if n.addr != "" {
		at = n.addr + ", "
	}
	if msg := n.lastErr.Load(); msg != nil {
		return fmt.Errorf("%w (%slast error: %s)", ErrUnavailable, at, *msg)
	}
	if n.addr != "" {
		return fmt.Errorf("%w (%s)", ErrUnavailable, n.addr)
	}
	return ErrUnavailable
}

// observe looks at a call's error: a network error while the caller's
// context is still live marks the node down and starts its probe. A
// context whose deadline has passed counts as ended even before its Err
// says so: go-redis bounds its reads by the deadline, and a read timed out
// there is the caller's bound, not the server's failure. It returns err
// unchanged.
func (n *node) observe(ctx context.Context, err error) error {
	if err == nil || ctx.Err() != nil || !isNetworkError(err) {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return err
	}
	msg := err.Error()
	n.lastErr.Store(&msg)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.down.Load() {
		return err
	}
	d := n.h.d
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return err
	}
	d.wg.Add(1)
	d.mu.Unlock()
	n.down.Store(true)
	n.up.Shut()
	go n.probe()
	return err
}

// wait returns when the node is up (at once if it is) or ctx ends.
func (n *node) wait(ctx context.Context) error { return n.up.Wait(ctx) }

// ping sends one PING to the node's own server: the one server; a Cluster
// master on its own client (a keyless PING on the Cluster client may go to
// every master); or, for a Cluster's slot map, loads it.
func (n *node) ping(ctx context.Context) error {
	h := n.h
	switch {
	case h.cc == nil:
		return h.d.client.Ping(ctx).Err()
	case n == h.one:
		_, err := h.cc.MasterForKey(ctx, "")
		return err
	}
	n.mu.Lock()
	c := n.client
	n.mu.Unlock()
	return c.Ping(ctx).Err()
}

// probe pings the node until it answers or the driver closes. A Cluster
// master whose client go-redis closed (the master left the slot map) is
// forgotten: the calls for its slots look their master up afresh.
func (n *node) probe() {
	d := n.h.d
	defer d.wg.Done()
	retry := probeBackoff.New()
	for {
		ctx, cancel := context.WithTimeout(d.ctx, probeTimeout)
		err := n.ping(ctx)
		cancel()
		if err == nil || (n.addr != "" && errors.Is(err, goredis.ErrClosed)) {
			if err != nil {
				n.h.forget(n)
			}
			n.mu.Lock()
			n.gen.Add(1) // it may be another process now
			n.down.Store(false)
			n.up.Open()
			n.mu.Unlock()
			return
		}
		msg := err.Error()
		n.lastErr.Store(&msg)
		n.h.reloadSlots()
		if !backoff.Sleep(d.ctx, retry.Next()) {
			return
		}
	}
}

// reloadSlots asks go-redis, at most once per reloadInterval, to load a
// Cluster's slot map again: while a master is down its slots' calls are
// refused without a request, so no MOVED reply would tell go-redis that a
// failover or a resharding gave them to another master, and it reloads its
// map on its own only when the map is a minute old. Without a Cluster it
// does nothing.
func (h *health) reloadSlots() {
	if h.cc == nil {
		return
	}
	now := time.Now().UnixNano()
	last := h.reloaded.Load()
	if now-last < int64(reloadInterval) || !h.reloaded.CompareAndSwap(last, now) {
		return
	}
	h.cc.ReloadState(h.d.ctx)
}

// forget drops a Cluster master's node.
func (h *health) forget(n *node) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.nodes[n.addr] == n {
		delete(h.nodes, n.addr)
	}
}

// isNetworkError reports whether err says the connection failed (as
// opposed to a server reply or a cancelled context). Callers rule out the
// end of their own context first: a deadline error while that context is
// live is the client's own dial or read timeout (a dial timeout also
// matches context.DeadlineExceeded), so the server is unreachable.
func isNetworkError(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, goredis.ErrPoolTimeout) {
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
