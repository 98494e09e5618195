package redis

import (
	"context"
	"fmt"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mutexfx/mutexfx/drivers"
)

// renewGroup is one renewScript call: leases of one slot (Cluster) or any
// leases (standalone), at most RenewBatch of them.
type renewGroup struct {
	idx  []int // indexes into the leases
	keys []string
	args []any
	node *node // the server of the group's slot
	err  error // set when the group was not sent (its server is down)
	cmd  *goredis.Cmd
	// replErr: fewer replicas than MinReplicas confirmed the renewal; the
	// leases it extended count as not renewed (an error), those it found
	// gone as lost.
	replErr error
}

// Renew extends every lease whose token still holds its lock. The leases
// are grouped by Cluster slot (all together on a standalone server or
// Sentinel master), split into groups of at most RenewBatch, and every
// group is one script call; all calls go in one pipeline, so a renewal tick
// costs one round trip per node (plus one if a server lost its scripts).
// Errors are per group: the groups of a Cluster master that is down fail
// (at once with ErrUnavailable while it reconnects) and the others renew.
func (d *Driver) Renew(ctx context.Context, leases []drivers.Lease) []drivers.RenewResult {
	out := make([]drivers.RenewResult, len(leases))
	if len(leases) == 0 {
		return out
	}
	var send []*renewGroup
	groups := d.group(leases)
	for _, g := range groups {
		g.node, g.err = d.health.gate(ctx, g.keys[0])
		if g.err == nil {
			send = append(send, g)
		}
	}
	if d.cluster {
		send = d.checkGroups(ctx, send)
	}
	if again := d.execRenew(ctx, send, false); len(again) > 0 {
		d.execRenew(ctx, again, true)
	}
	for _, g := range groups {
		gerr := g.err
		var vals []any
		if gerr == nil {
			vals, gerr = g.cmd.Slice()
		}
		if gerr == nil && len(vals) != len(g.idx) {
			gerr = fmt.Errorf("unexpected reply of %d values for %d leases", len(vals), len(g.idx))
		}
		for j, i := range g.idx {
			if gerr != nil {
				out[i].Err = fmt.Errorf("redis: renew: %w", d.explain(gerr))
				continue
			}
			n, _ := vals[j].(int64)
			if n == 1 && g.replErr != nil {
				out[i].Err = fmt.Errorf("redis: renew: %w", g.replErr)
				continue
			}
			out[i].Held = n == 1
		}
	}
	return out
}

// execRenew sends the groups' script calls in one pipeline (EVAL when
// eval, else EVALSHA), in a Cluster that waits for replicas one per master
// (see renewWaiting); each group's reply or error stays in its command. A
// group's network error marks its node down. It returns the groups whose
// server answered NOSCRIPT (it lost its scripts), whatever the other
// nodes answered.
func (d *Driver) execRenew(ctx context.Context, groups []*renewGroup, eval bool) []*renewGroup {
	if len(groups) == 0 {
		return nil
	}
	if d.cluster {
		if again, ok := d.renewWaiting(ctx, groups, eval); ok {
			return again
		}
		return d.renewPipe(ctx, d.client.Pipeline(), groups, eval, 0)
	}
	return d.renewPipe(ctx, d.client.Pipeline(), groups, eval, d.replicaWait(d.health.one))
}

// renewPipe sends groups on pipe, followed by WAIT for want replicas when
// want is positive (pipe then reaches one server).
func (d *Driver) renewPipe(ctx context.Context, pipe goredis.Pipeliner, groups []*renewGroup, eval bool, want int64) []*renewGroup {
	for _, g := range groups {
		if eval {
			g.cmd = renewScript.Eval(ctx, pipe, g.keys, g.args...)
		} else {
			g.cmd = renewScript.EvalSha(ctx, pipe, g.keys, g.args...)
		}
	}
	var wait *goredis.Cmd
	if want > 0 {
		wait = pipe.Do(ctx, "WAIT", want, d.set.replicaTimeout.Milliseconds())
	}
	_, _ = pipe.Exec(ctx) // errors are read per command
	var replErr error
	if wait != nil {
		if got, err := wait.Int64(); err != nil {
			replErr = fmt.Errorf("WAIT: %w", err)
		} else if got < want {
			replErr = replicaError(want, got)
		}
	}
	var again []*renewGroup
	for _, g := range groups {
		err := g.cmd.Err()
		g.replErr = replErr
		if err != nil && !eval && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			again = append(again, g)
			continue
		}
		if err != nil {
			d.redirected(err)
		}
		_ = g.node.observe(ctx, err)
	}
	return again
}

// renewWaiting renews a Cluster's groups with one pipeline per master, all
// at once, each followed by WAIT for that master's replicas, when one of
// them must wait (else ok is false and nothing was sent).
func (d *Driver) renewWaiting(ctx context.Context, groups []*renewGroup, eval bool) (again []*renewGroup, ok bool) {
	byNode := map[*node][]*renewGroup{}
	for _, g := range groups {
		if d.replicaWait(g.node) > 0 {
			ok = true
		}
		byNode[g.node] = append(byNode[g.node], g)
	}
	if !ok {
		return nil, false
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for n, gs := range byNode {
		wg.Go(func() {
			a := d.renewPipe(ctx, d.pipeline(n), gs, eval, d.replicaWait(n))
			mu.Lock()
			again = append(again, a...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return again, true
}

// checkGroups checks the slots of groups on their masters when due (see
// cluster.go) and returns the groups to send; a group whose check failed
// keeps the error.
func (d *Driver) checkGroups(ctx context.Context, groups []*renewGroup) []*renewGroup {
	keys := make([]string, len(groups))
	nodes := make([]*node, len(groups))
	for i, g := range groups {
		keys[i], nodes[i] = g.keys[0], g.node
	}
	errs := d.checkSlots(ctx, keys, nodes)
	send := groups[:0]
	for i, g := range groups {
		if g.err = errs[i]; g.err == nil {
			send = append(send, g)
		}
	}
	return send
}

// group splits leases into script calls by slot and batch size.
func (d *Driver) group(leases []drivers.Lease) []*renewGroup {
	var groups []*renewGroup
	open := map[int]*renewGroup{} // slot (or 0 standalone) -> group being filled
	for i, l := range leases {
		k := lockKey(l.Key)
		s := 0
		if d.cluster {
			s = slot(k)
		}
		g := open[s]
		if g == nil || len(g.idx) >= d.set.renewBatch {
			g = &renewGroup{}
			open[s] = g
			groups = append(groups, g)
		}
		g.idx = append(g.idx, i)
		g.keys = append(g.keys, k)
		g.args = append(g.args, l.Token, d.longest.see(l.TTL))
	}
	return groups
}
