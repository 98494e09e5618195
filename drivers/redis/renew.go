package redis

import (
	"context"
	"fmt"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mutexfx/mutexfx/drivers"
)

// renewGroup is one renewScript call: leases of one slot (Cluster) or any
// leases (standalone), at most RenewBatch of them.
type renewGroup struct {
	idx  []int // indexes into the leases
	keys []string
	args []any
	cmd  *goredis.Cmd
}

// Renew extends every lease whose token still holds its lock. The leases
// are grouped by Cluster slot (all together on a standalone server or
// Sentinel master), split into groups of at most RenewBatch, and every
// group is one script call; all calls go in one pipeline, so a renewal tick
// costs one round trip per node (plus one if the server lost its scripts).
func (d *Driver) Renew(ctx context.Context, leases []drivers.Lease) []drivers.RenewResult {
	out := make([]drivers.RenewResult, len(leases))
	if len(leases) == 0 {
		return out
	}
	if err := d.health.check(); err != nil {
		return fail(out, fmt.Errorf("redis: renew: %w", err))
	}
	groups := d.group(leases)
	err := d.execRenew(ctx, groups, false)
	if err == nil {
		var again []*renewGroup
		for _, g := range groups {
			if e := g.cmd.Err(); e != nil && strings.HasPrefix(e.Error(), "NOSCRIPT") {
				again = append(again, g)
			}
		}
		if len(again) > 0 {
			err = d.execRenew(ctx, again, true)
		}
	}
	if err != nil {
		_ = d.health.observe(ctx, err)
	}
	for _, g := range groups {
		vals, gerr := g.cmd.Slice()
		if gerr == nil && len(vals) != len(g.idx) {
			gerr = fmt.Errorf("unexpected reply of %d values for %d leases", len(vals), len(g.idx))
		}
		for j, i := range g.idx {
			if gerr != nil {
				out[i].Err = fmt.Errorf("redis: renew: %w", gerr)
				continue
			}
			n, _ := vals[j].(int64)
			out[i].Held = n == 1
		}
	}
	return out
}

// execRenew sends the groups' script calls in one pipeline (EVAL when
// eval, else EVALSHA). It returns a network error; per-group replies stay
// in the groups' commands.
func (d *Driver) execRenew(ctx context.Context, groups []*renewGroup, eval bool) error {
	pipe := d.client.Pipeline()
	for _, g := range groups {
		if eval {
			g.cmd = renewScript.Eval(ctx, pipe, g.keys, g.args...)
		} else {
			g.cmd = renewScript.EvalSha(ctx, pipe, g.keys, g.args...)
		}
	}
	_, err := pipe.Exec(ctx)
	if err != nil && isNetworkError(err) {
		return err
	}
	return nil
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
		g.args = append(g.args, l.Token, ttlMillis(l.TTL))
	}
	return groups
}

func fail(out []drivers.RenewResult, err error) []drivers.RenewResult {
	for i := range out {
		out[i].Err = err
	}
	return out
}
