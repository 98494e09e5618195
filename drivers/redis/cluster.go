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
//
// A call decides that its slot is checked before go-redis takes the
// connection its script runs on, and go-redis may drop a dead idle one
// then and dial a new one, to a master restarted at the same address. So
// the first new connection that finds another run_id checks, on itself and
// before go-redis hands it out, every slot this driver checked on that
// master (recheck; connections opened meanwhile wait for it): no script of
// the driver runs on a master process before its slot's check there.

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
var slotEpochScript = goredis.NewScript(slotEpochSrc)

// slotEpochSrc is slotEpochScript's source.
const slotEpochSrc = epochLua + `
local id = string.match(info('server'), 'run_id:(%x+)')
local run = redis.call('GET', KEYS[3])
if not id or run == id then return 0 end
local left = 0
if redis.call('EXISTS', KEYS[1]) == 1 then
  left = epoch(KEYS[1], KEYS[2], tonumber(ARGV[1]), true)
end
redis.call('SET', KEYS[3], id)
return left
`

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
// (the default MinReplicas) and its run_id (see newProcess). A user
// refused INFO skips it.
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
	return d.newProcess(ctx, cn, n, infoField(info, "run_id"))
}

// newProcess records that cn reached run, the run_id of n's master. Another
// than the one seen before means another server process: before cn is
// used, the slots checked on n are checked again on cn (recheck), while
// the other new connections to n wait. A failed check fails cn (the call
// that opened it fails, retryable) and leaves the run_id unrecorded, so
// that the next new connection checks again.
func (d *Driver) newProcess(ctx context.Context, cn *goredis.Conn, n *node, run string) error {
	n.runMu.Lock()
	defer n.runMu.Unlock()
	if run == "" || run == n.runID {
		return nil
	}
	if n.runID != "" {
		if err := d.recheck(ctx, cn, n); err != nil {
			return err
		}
	}
	n.runID = run
	return nil
}

// recheck checks on cn, a new connection to another process of n's master,
// every slot this driver checked on n, in one pipeline, then moves n to a
// new gen with those slots checked at it (a check of another slot that was
// under way is then done again: see checkSlots). A slot that n no longer
// serves (a redirection) is skipped: it is checked on its master before a
// call there.
func (d *Driver) recheck(ctx context.Context, cn *goredis.Conn, n *node) error {
	slots := d.slots.on(n)
	var ok []int
	if wait := d.restartWait(0); wait > 0 && len(slots) > 0 {
		pipe := cn.Pipeline()
		// A new process has no scripts. (Not slotEpochScript.Load: queued
		// in a pipeline, it would record an empty hash.)
		pipe.ScriptLoad(ctx, slotEpochSrc)
		cmds := make([]*goredis.Cmd, len(slots))
		for i, s := range slots {
			m := &slotMarks()[s]
			cmds[i] = slotEpochScript.EvalSha(ctx, pipe, []string{m[0], m[1], m[0] + runSuffix}, wait)
		}
		_, _ = pipe.Exec(ctx) // errors are read per command
		for i, s := range slots {
			switch err := cmds[i].Err(); {
			case err == nil:
				ok = append(ok, s)
			case isRedirect(err):
				d.redirected(err)
			default:
				return fmt.Errorf("redis: checking the slots of a restarted master: %w", err)
			}
		}
	}
	d.slots.restarted(n, ok)
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
	c.mu.Lock()
	defer c.mu.Unlock()
	gen := n.gen.Load()
	return gen, c.seen[s] != checked{n, gen}
}

// done records that slot s was checked on n at gen, unless n moved to
// another gen since (the check may have run on the process before).
func (c *slotChecks) done(s int, n *node, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != n.gen.Load() {
		return
	}
	if c.seen == nil {
		c.seen = map[int]checked{}
	}
	c.seen[s] = checked{n, gen}
}

// on returns the slots last checked on n, at any gen.
func (c *slotChecks) on(n *node) []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var slots []int
	for s, ch := range c.seen {
		if ch.n == n {
			slots = append(slots, s)
		}
	}
	return slots
}

// restarted moves n to a new gen, recording slots (checked on n's new
// process) as checked at it.
func (c *slotChecks) restarted(n *node, slots []int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	gen := n.gen.Add(1)
	for _, s := range slots {
		if c.seen[s].n == n {
			c.seen[s] = checked{n, gen}
		}
	}
}

// checkRounds bounds checkSlots's rounds: a slot is due again after a
// round only when its master moved to another gen during it (a new process
// found on a new connection, an answer after a network error).
const checkRounds = 3

// checkSlots checks the slots of keys (served by nodes) that are due, in
// one pipeline per master, and returns an error per key (nil when checked
// or not due). A slot whose master moved to another gen meanwhile (the
// check may have run on the process before) is checked again. A driver
// that was asked for no ttl yet (the restart wait would be 0) checks
// nothing: it grants nothing but hand-offs to waiters, whose drivers
// check.
func (d *Driver) checkSlots(ctx context.Context, keys []string, nodes []*node) []error {
	errs := make([]error, len(keys))
	wait := d.restartWait(0)
	if wait == 0 {
		return errs
	}
	for range checkRounds {
		todo := d.dueSlots(keys, nodes, errs)
		if len(todo) == 0 {
			return errs
		}
		d.checkRound(ctx, todo, wait, keys, errs)
	}
	for _, t := range d.dueSlots(keys, nodes, errs) {
		slotErr(keys, errs, t.slot, fmt.Errorf("redis: checking the slot's master: it became another process %d times during the check; retry", checkRounds))
	}
	return errs
}

// slotDue is a slot to check on its master.
type slotDue struct {
	n    *node
	slot int
	gen  uint64
	cmd  *goredis.Cmd
}

// dueSlots returns the slots of keys (served by nodes) without an error
// yet that are due, each once.
func (d *Driver) dueSlots(keys []string, nodes []*node, errs []error) []*slotDue {
	var todo []*slotDue
	queued := map[int]bool{}
	for i, k := range keys {
		if errs[i] != nil {
			continue
		}
		s := slot(k)
		if gen, ok := d.slots.need(s, nodes[i]); ok && !queued[s] {
			queued[s] = true
			todo = append(todo, &slotDue{n: nodes[i], slot: s, gen: gen})
		}
	}
	return todo
}

// checkRound checks todo with one pipeline per master, on its own
// connection (not redirected: the check must run on the master it is
// recorded for; see moved.go), and sets the errors of the keys of the
// slots whose check failed.
func (d *Driver) checkRound(ctx context.Context, todo []*slotDue, wait int64, keys []string, errs []error) {
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
		slotErr(keys, errs, t.slot, fmt.Errorf("redis: checking the slot's master: %w", d.explain(t.n.observe(ctx, err))))
	}
}

// slotErr sets err for the keys of slot s that have no error yet.
func slotErr(keys []string, errs []error, s int, err error) {
	for i, k := range keys {
		if errs[i] == nil && slot(k) == s {
			errs[i] = err
		}
	}
}
