package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mutexfx/mutexfx/drivers"
)

// DefaultReplicaTimeout bounds the WAIT for replicas (Options.MinReplicas).
const DefaultReplicaTimeout = 100 * time.Millisecond

// ErrReplicas is returned (wrapped) when fewer replicas than MinReplicas
// confirmed an acquisition, extension or renewal within ReplicaTimeout.
// The acquisition was released; the extension or renewal counts as failed.
var ErrReplicas = errors.New("redis: too few replicas confirmed the write")

// replicaWait returns how many replicas must confirm a write on n's
// server: MinReplicas when positive; none when it is negative or the
// driver is standalone; else (Sentinel, Cluster: the default) 1 when the
// server had a replica at the driver's last new connection to it.
func (d *Driver) replicaWait(n *node) int64 {
	switch {
	case d.set.minReplicas > 0:
		return int64(d.set.minReplicas)
	case d.set.minReplicas < 0 || (d.set.masterName == "" && !d.cluster):
		return 0
	}
	return min(n.replicas.Load(), 1)
}

// runReplicated is run, followed on the same connection (one pipeline, one
// round trip; in a Cluster on the connection to the master of keys[0]) by
// WAIT for the replicas replicaWait asks for; fewer confirmations within
// ReplicaTimeout return the script's reply with an error wrapping
// ErrReplicas.
func (d *Driver) runReplicated(ctx context.Context, s *goredis.Script, keys []string, args ...any) (any, error) {
	return d.onMaster(ctx, true, keys[0], func(n *node) (any, error) { return d.evalReplicated(ctx, n, s, keys, args) })
}

// evalReplicated is runReplicated's one attempt on n's server.
func (d *Driver) evalReplicated(ctx context.Context, n *node, s *goredis.Script, keys []string, args []any) (any, error) {
	if !n.counted.Load() && d.set.minReplicas == 0 && (d.set.masterName != "" || d.cluster) {
		// The default counts the server's replicas at a new connection:
		// before the first one, open it (one PING, once per server), or
		// the first write would go without WAIT.
		if err := n.ping(ctx); err != nil {
			return nil, d.explain(n.observe(ctx, err))
		}
		n.counted.Store(true)
	}
	want := d.replicaWait(n)
	if want == 0 {
		return d.eval(ctx, n, s, keys, args...)
	}
	v, got, err := d.evalWait(ctx, n, s, keys, args, want, false)
	if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		v, got, err = d.evalWait(ctx, n, s, keys, args, want, true)
	}
	if err == goredis.Nil {
		v, err = nil, nil
	}
	if err != nil {
		return nil, d.explain(n.observe(ctx, err))
	}
	if got < want {
		return v, replicaError(want, got)
	}
	return v, nil
}

// evalWait sends the script (EVAL when eval, else EVALSHA) and WAIT in one
// pipeline and returns the script's reply and the replicas confirmed.
func (d *Driver) evalWait(ctx context.Context, n *node, s *goredis.Script, keys []string, args []any, want int64, eval bool) (any, int64, error) {
	pipe := d.pipeline(n)
	var cmd *goredis.Cmd
	if eval {
		cmd = s.Eval(ctx, pipe, keys, args...)
	} else {
		cmd = s.EvalSha(ctx, pipe, keys, args...)
	}
	w := pipe.Do(ctx, "WAIT", want, d.set.replicaTimeout.Milliseconds())
	_, _ = pipe.Exec(ctx) // errors are read per command
	v, err := cmd.Result()
	if err != nil {
		return nil, 0, err
	}
	got, werr := w.Int64()
	if werr != nil {
		return nil, 0, fmt.Errorf("WAIT: %w", werr)
	}
	return v, got, nil
}

// replicaError reports that got of want replicas confirmed a write.
func replicaError(want, got int64) error {
	return fmt.Errorf("%w: %d of %d", ErrReplicas, got, want)
}

// pipeline returns a pipeline on n's server: the driver's client, or in a
// Cluster the client of n's master alone (a Cluster pipeline would send a
// keyless WAIT to any node).
func (d *Driver) pipeline(n *node) goredis.Pipeliner {
	if !d.cluster || n.addr == "" {
		return d.client.Pipeline()
	}
	n.mu.Lock()
	c := n.client
	n.mu.Unlock()
	return c.Pipeline()
}

// confirmHandoff makes a lock handed to a waiting call (res) count only
// once replicas have it, as an acquisition does. Another driver's release
// wrote the hand-off, so its WAIT, if any, was not this call's: the waiter
// extends the lock to its ttl on its own connection and WAITs there;
// replication being in order, a confirmed extension confirms the hand-off.
// With fewer replicas the lock is released (passed on) and the call fails
// with ErrReplicas. Without replicas to wait for it returns res.
func (d *Driver) confirmHandoff(ctx context.Context, req drivers.AcquireRequest, res drivers.AcquireResult) (drivers.AcquireResult, error) {
	if d.set.minReplicas < 0 || (d.set.masterName == "" && !d.cluster) {
		return res, nil
	}
	key := lockKey(req.Key)
	if n, err := d.health.node(ctx, key); err == nil && d.replicaWait(n) == 0 {
		return res, nil
	}
	v, err := d.runReplicated(ctx, extendScript, []string{key}, req.Token, d.longest.see(req.TTL))
	if err != nil {
		_, _ = d.Release(ctx, req.Key, req.Token)
		return drivers.AcquireResult{}, fmt.Errorf("redis: acquire: a lock handed over: %w", err)
	}
	if held, _ := v.(int64); held != 1 {
		return drivers.AcquireResult{}, errors.New("redis: acquire: a lock handed over expired before replicas confirmed it")
	}
	return res, nil
}
