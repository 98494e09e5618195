package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"
)

// ErrClusterNode is returned by every call of a driver not in Cluster mode
// whose server is a Redis Cluster node: such a server serves only its own
// slots and answers MOVED for the others.
var ErrClusterNode = errors.New("redis: this server is a Cluster node: set cluster: true")

// servers remembers the server process (run_id) the driver's connections
// reached last, standalone or Sentinel: a new connection that reaches
// another one (a restart, a fail-over) starts a new epoch there (see
// epoch.go), even when the new server kept the epoch marker (a replica
// promoted with an older copy of the keys).
type servers struct {
	mu    sync.Mutex
	runID string
}

// onConnect runs on every new connection of a client the driver built (the
// Sentinels' connections too). It reads INFO once: a Cluster node behind a
// driver not in Cluster mode fails the connection with ErrClusterNode; a
// standalone or Sentinel-chosen master whose run_id is not the one seen
// last starts a new epoch. A user refused INFO skips both (the markers
// still catch a forgotten keyspace).
func (d *Driver) onConnect(ctx context.Context, cn *goredis.Conn) error {
	if d.cluster {
		return nil // see onClusterConnect
	}
	info, err := cn.Info(ctx).Result()
	if err != nil {
		if strings.HasPrefix(err.Error(), "NOPERM") {
			return nil
		}
		return err
	}
	field := func(name string) string { return infoField(info, name) }
	if field("redis_mode") == "sentinel" {
		return nil
	}
	if field("cluster_enabled") == "1" {
		return ErrClusterNode
	}
	if field("role") != "master" {
		return nil
	}
	if n, err := strconv.ParseInt(field("connected_slaves"), 10, 64); err == nil {
		d.health.one.replicas.Store(n)
	}
	return d.servers.seen(ctx, cn, field("run_id"), d.restartWait(0))
}

// infoField returns the value of an INFO reply's field, or "".
func infoField(info, name string) string {
	_, v, ok := strings.Cut(info, "\n"+name+":")
	if !ok {
		return ""
	}
	v, _, _ = strings.Cut(v, "\n")
	return strings.TrimSpace(v)
}

// seen records runID; when another run_id was seen before it starts a new
// epoch on cn's server first, waiting wait ms.
func (s *servers) seen(ctx context.Context, cn *goredis.Conn, runID string, wait int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if runID == "" || runID == s.runID {
		return nil
	}
	if s.runID != "" {
		if err := cn.Eval(ctx, epochSrc, []string{epochKey, epochKey + waitSuffix}, wait).Err(); err != nil {
			return fmt.Errorf("redis: starting a new epoch on a new server process: %w", err)
		}
	}
	s.runID = runID
	return nil
}

// explain replaces go-redis's errors whose text misleads with ones that
// name the cause: a Sentinel that knows no master of that name (go-redis
// says the sentinels are unreachable), a Cluster node behind a driver not
// in Cluster mode (MOVED). The result still wraps err.
func (d *Driver) explain(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	switch {
	case d.set.masterName != "" && errors.Is(err, goredis.Nil) && strings.Contains(msg, "all sentinels"):
		at := "the configured addresses"
		if len(d.set.sentinels) > 0 {
			at = strings.Join(d.set.sentinels, ", ")
		}
		return &causeError{msg: fmt.Sprintf("redis: sentinels at %s know no master named %q", at, d.set.masterName), err: err, is: errUnknownMaster}
	case !d.cluster && (strings.HasPrefix(msg, "MOVED ") || strings.HasPrefix(msg, "ASK ")):
		return &causeError{msg: ErrClusterNode.Error(), err: err, is: ErrClusterNode}
	case d.cluster && strings.HasPrefix(msg, "MOVED "):
		return &causeError{msg: "redis: the key's slot has another master (a fail-over or resharding) and the slot map is not reloaded yet (" + msg + "); retry", err: err}
	case d.cluster && strings.HasPrefix(msg, "ASK "):
		return &causeError{msg: "redis: the key's slot is being migrated (" + msg + "); retry when the migration ends", err: err}
	}
	return err
}

// causeError is a go-redis error told by its cause; it wraps the original
// (and is, when set).
type causeError struct {
	msg string
	err error
	is  error
}

func (e *causeError) Error() string { return e.msg }

func (e *causeError) Unwrap() []error {
	if e.is != nil {
		return []error{e.err, e.is}
	}
	return []error{e.err}
}
