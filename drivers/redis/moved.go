package redis

import (
	"context"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mutexfx/mutexfx/internal/backoff"
)

// Redirections. In a Cluster every script runs on the connection of the
// master the driver's slot map names for its key (scripter), never through
// go-redis's redirections: the driver checks a slot on a master before it
// lets a script grant locks there (cluster.go), and a redirection followed
// inside go-redis would carry the script to a master the driver never
// checked — a replica promoted after a replication cut, still holding an
// older copy of the slot. A master that no longer serves the slot answers
// MOVED (the script did nothing there); the driver has go-redis reload its
// slot map, waits up to movedWait for the map to name another master, and
// runs the call again, after checking the slot there (onMaster). ASK (a
// slot being migrated) fails the call with a retryable error: a waiting
// Acquire retries until the migration ends.

// movedWait bounds the wait for the slot map to follow a MOVED reply.
const movedWait = 2 * time.Second

// movedBackoff is the pause between two looks at the reloaded slot map:
// the one retry policy, from 10 ms (a reload is one round trip) to 200 ms.
var movedBackoff = backoff.Policy{Start: 10 * time.Millisecond, Cap: 200 * time.Millisecond}

// onMaster runs f on the master of key once key's slot is checked there
// (through the health gate when gated, else past it), following one MOVED
// reply to the slot's new master.
func (d *Driver) onMaster(ctx context.Context, gated bool, key string, f func(*node) (any, error)) (any, error) {
	for moved := false; ; moved = true {
		n, err := d.checked(ctx, gated, key)
		var v any
		if err == nil {
			v, err = f(n)
		}
		if moved || n == nil || !d.followMoved(ctx, n, key, err) {
			return v, err
		}
	}
}

// checked returns the node of key's master (through the health gate when
// gated, else past it), in a Cluster with key's slot checked on it when
// due (see cluster.go).
func (d *Driver) checked(ctx context.Context, gated bool, key string) (*node, error) {
	var n *node
	var err error
	if gated {
		n, err = d.health.gate(ctx, key)
	} else {
		n, err = d.health.node(ctx, key)
	}
	if err != nil || !d.cluster {
		return n, err
	}
	if _, due := d.slots.need(slot(key), n); !due {
		return n, nil
	}
	return n, d.checkSlots(ctx, []string{key}, []*node{n})[0]
}

// scripter is the client a script for n's server runs on: the driver's
// client, or in a Cluster the client of n's master alone.
func (d *Driver) scripter(n *node) goredis.Scripter {
	if !d.cluster || n.addr == "" {
		return d.client
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.client
}

// isRedirect reports whether err is a Cluster redirection (MOVED or ASK).
func isRedirect(err error) bool {
	return goredis.HasErrorPrefix(err, "MOVED ") || goredis.HasErrorPrefix(err, "ASK ")
}

// followMoved reports whether a call that n's master answered err should
// run again: err is MOVED, and go-redis's reloaded slot map names another
// master for key within movedWait.
func (d *Driver) followMoved(ctx context.Context, n *node, key string, err error) bool {
	if !d.cluster || !goredis.HasErrorPrefix(err, "MOVED ") {
		return false
	}
	d.health.cc.ReloadState(ctx)
	ctx, cancel := context.WithTimeout(ctx, movedWait)
	defer cancel()
	retry := movedBackoff.New()
	for backoff.Sleep(ctx, retry.Next()) {
		c, err := d.health.cc.MasterForKey(ctx, key)
		if err == nil && c.Options().Addr != n.addr {
			return true
		}
		d.health.cc.ReloadState(ctx)
	}
	return false
}

// redirected has go-redis reload its Cluster slot map when err is a
// redirection answered to a pipeline sent to one master: that master no
// longer serves the slot. Scripts need not call it: onMaster reloads the
// map itself on MOVED (a second request while go-redis reloads would only
// queue another reload).
func (d *Driver) redirected(err error) {
	if d.cluster && isRedirect(err) {
		d.health.reloadSlots()
	}
}
