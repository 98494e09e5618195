package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"
)

// Cluster masters that may have forgotten writes. A slot's epoch marker
// (epoch.go) catches a master that lost it; a replica promoted with the
// marker but without the latest writes, or a master restarted from a
// persistence file that missed them, keeps it. So the driver checks each
// slot once on each master process that serves it, before its first call
// there: slotEpochScript compares the master's run_id with the one stored
// beside the slot's marker (by the last check, replicated with it) and,
// when they differ and the marker exists, starts a new epoch on that slot
// (nothing granted for the restart wait; fences above the old ones). As
// the run_id is the server's own, a process that never saw the old master
// is held back too. A slot is checked again when its master's address
// changes (a fail-over moved it) or its node's gen grows (a new run_id on
// a new connection, or an answer after a network error).

// runSuffix is appended to a slot's marker for the key of the run_id of the
// master process it was last checked on.
const runSuffix = ":run"

// slotEpochScript checks a slot on the master that runs it and returns the
// wait it started in ms (0: none). A marker without a run_id record counts
// as checked on another process: the record may have been lost, or
// written while replication was cut and be missing on a promoted replica.
// A slot without a marker (brand new, or forgotten: the acquire script's
// epoch then applies) just gets the record. A user refused INFO gets no
// check (the markers still apply).
//
//	KEYS[1] epoch marker, KEYS[2] its wait key, KEYS[3] the run_id key
//	ARGV[1] restart wait (ms)
var slotEpochScript = goredis.NewScript(epochLua + `
local id = string.match(info('server'), 'run_id:(%x+)')
local run = redis.call('GET', KEYS[3])
if not id or run == id then return 0 end
local left = 0
if redis.call('EXISTS', KEYS[1]) == 1 then
  left = epoch(KEYS[1], KEYS[2], tonumber(ARGV[1]), true)
end
redis.call('SET', KEYS[3], id)
return left
`)

// clusterClient returns a Cluster client on u whose connections to each
// node run connect with that node's address.
func clusterClient(u *goredis.UniversalOptions, connect func(context.Context, *goredis.Conn, string) error) *goredis.ClusterClient {
	co := u.Cluster()
	co.NewClient = func(opt *goredis.Options) *goredis.Client {
		addr := opt.Addr
		opt.OnConnect = func(ctx context.Context, cn *goredis.Conn) error { return connect(ctx, cn, addr) }
		return goredis.NewClient(opt)
	}
	return goredis.NewClusterClient(co)
}

// onClusterConnect runs on every new connection of the driver's Cluster
// client to the node at addr. On a master it records the replicas it has
// (the default MinReplicas) and its run_id: another than the one seen
// before means another server process, so its slots are checked again. A
// user refused INFO skips it.
func (d *Driver) onClusterConnect(ctx context.Context, cn *goredis.Conn, addr string) error {
	info, err := cn.Info(ctx).Result()
	if err != nil {
		if strings.HasPrefix(err.Error(), "NOPERM") {
			return nil
		}
		return err
	}
	if infoField(info, "role") != "master" {
		return nil
	}
	n := d.health.at(addr)
	if v, err := strconv.ParseInt(infoField(info, "connected_slaves"), 10, 64); err == nil {
		n.replicas.Store(v)
	}
	run := infoField(info, "run_id")
	n.mu.Lock()
	if run != "" && run != n.runID {
		if n.runID != "" {
			n.gen.Add(1)
		}
		n.runID = run
	}
	n.mu.Unlock()
	return nil
}

// slotChecks remembers, per Cluster hash slot, the master node and its gen
// the slot was last checked on.
type slotChecks struct {
	mu   sync.Mutex
	seen map[int]checked
}

// checked is a slot's last check.
type checked struct {
	n   *node
	gen uint64
}

// need reports whether slot s must be checked on n, and n's gen to record.
func (c *slotChecks) need(s int, n *node) (uint64, bool) {
	gen := n.gen.Load()
	c.mu.Lock()
	defer c.mu.Unlock()
	return gen, c.seen[s] != checked{n, gen}
}

// done records that slot s was checked on n at gen.
func (c *slotChecks) done(s int, n *node, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[int]checked{}
	}
	c.seen[s] = checked{n, gen}
}

// checkSlots checks the slots of keys (served by nodes) that are due, in
// one pipeline, and returns an error per key (nil when checked or not due).
// A driver that was asked for no ttl yet (the restart wait would be 0)
// checks nothing: it grants nothing but hand-offs to waiters, whose
// drivers check.
func (d *Driver) checkSlots(ctx context.Context, keys []string, nodes []*node) []error {
	errs := make([]error, len(keys))
	wait := d.restartWait(0)
	if wait == 0 {
		return errs
	}
	type due struct {
		n    *node
		slot int
		gen  uint64
		cmd  *goredis.Cmd
	}
	var todo []*due
	queued := map[int]bool{}
	for i, k := range keys {
		s := slot(k)
		if gen, ok := d.slots.need(s, nodes[i]); ok && !queued[s] {
			queued[s] = true
			todo = append(todo, &due{n: nodes[i], slot: s, gen: gen})
		}
	}
	if len(todo) == 0 {
		return errs
	}
	// One pipeline per master, on its own connection (not redirected: the
	// check must run on the master it is recorded for; see moved.go).
	pipes := map[*node]goredis.Pipeliner{}
	for _, t := range todo {
		pipe := pipes[t.n]
		if pipe == nil {
			pipe = d.pipeline(t.n)
			pipes[t.n] = pipe
		}
		m := &slotMarks()[t.slot]
		t.cmd = slotEpochScript.Eval(ctx, pipe, []string{m[0], m[1], m[0] + runSuffix}, wait)
	}
	for _, pipe := range pipes {
		_, _ = pipe.Exec(ctx) // errors are read per command
	}
	for _, t := range todo {
		err := t.cmd.Err()
		if err == nil {
			d.slots.done(t.slot, t.n, t.gen)
			continue
		}
		d.redirected(err)
		err = fmt.Errorf("redis: checking the slot's master: %w", d.explain(t.n.observe(ctx, err)))
		for i, k := range keys {
			if errs[i] == nil && slot(k) == t.slot {
				errs[i] = err
			}
		}
	}
	return errs
}
