package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// DefaultReplicaTimeout bounds the WAIT for replicas (Options.MinReplicas).
const DefaultReplicaTimeout = 100 * time.Millisecond

// ErrReplicas is returned (wrapped) when fewer replicas than MinReplicas
// confirmed an acquisition, extension or renewal within ReplicaTimeout.
// The acquisition was released; the extension or renewal counts as failed.
var ErrReplicas = errors.New("redis: too few replicas confirmed the write")

// replicaCount is the number of replicas the master had at the driver's
// last connection to it (INFO connected_slaves).
type replicaCount struct{ n atomic.Int64 }

// replicaWait returns how many replicas must confirm a write: MinReplicas
// when positive; none when it is negative or the driver is not in Sentinel
// mode; else (Sentinel, the default) 1 when the master had a replica at the
// last connection.
func (d *Driver) replicaWait() int64 {
	switch {
	case d.set.minReplicas > 0:
		return int64(d.set.minReplicas)
	case d.set.minReplicas < 0 || d.set.masterName == "":
		return 0
	}
	return min(d.replicas.n.Load(), 1)
}

// runReplicated is run, followed on the same connection (one pipeline, one
// round trip) by WAIT for the replicas replicaWait asks for; fewer
// confirmations within ReplicaTimeout return the script's reply with an
// error wrapping ErrReplicas.
func (d *Driver) runReplicated(ctx context.Context, s *goredis.Script, keys []string, args ...any) (any, error) {
	want := d.replicaWait()
	if want == 0 {
		return d.run(ctx, s, keys, args...)
	}
	n, err := d.health.gate(ctx, keys[0])
	if err != nil {
		return nil, err
	}
	v, got, err := d.evalWait(ctx, s, keys, args, want, false)
	if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		v, got, err = d.evalWait(ctx, s, keys, args, want, true)
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
func (d *Driver) evalWait(ctx context.Context, s *goredis.Script, keys []string, args []any, want int64, eval bool) (any, int64, error) {
	pipe := d.client.Pipeline()
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
