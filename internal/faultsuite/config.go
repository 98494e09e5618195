//go:build linux

package faultsuite

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Fault names.
const (
	FaultKill     = "kill"     // SIGKILL a child, start a new one
	FaultPause    = "pause"    // SIGSTOP a child for 1.5–2.5 ttl, then SIGCONT
	FaultStall    = "stall"    // a child's proxy stops moving bytes for 1.5–2.5 ttl
	FaultReset    = "reset"    // a child's proxy aborts its connections with RST
	FaultRestart  = "restart"  // the Redis server is killed and restarted empty
	FaultFailover = "failover" // the (Sentinel or a Cluster) master is killed, its replica promoted
	// FaultLagFailover is a fail-over after a replication cut: the replica
	// is frozen and its link cut on the master, the holders go on for ½
	// ttl, the master is killed and the replica thawed and promoted
	// without the writes of that time.
	FaultLagFailover = "lagfailover"
	FaultBackend     = "backend" // a client backend is killed (pg_terminate_backend, KILL CONNECTION)
	// FaultLeaderKill kills the etcd cluster's leader (SIGKILL) and
	// restarts it with its data one ttl later.
	FaultLeaderKill = "leaderkill"
	// FaultMemberPause freezes a random etcd member (SIGSTOP) for
	// 1.5–2.5 ttl, then SIGCONT.
	FaultMemberPause = "memberpause"
)

// Mode is one store set-up the suite runs against.
type Mode struct {
	// Name is the -store value.
	Name string
	// Faults are the faults that apply.
	Faults []string
	// ConnectionBound: the store frees a lock when it sees its connection
	// end, before the holder can be told; the goal then bounds the
	// unsignalled overlap instead of forbidding it.
	ConnectionBound bool
}

// Modes are the store modes, in the order the suite runs them.
var Modes = []Mode{
	{Name: "file", Faults: []string{FaultKill, FaultPause}},
	{Name: "memory"},
	{Name: "redis", Faults: []string{FaultKill, FaultPause, FaultStall, FaultReset, FaultRestart}},
	{Name: "sentinel", Faults: []string{FaultKill, FaultPause, FaultFailover, FaultLagFailover}},
	{Name: "cluster", Faults: []string{FaultKill, FaultPause, FaultFailover, FaultLagFailover}},
	{Name: "postgres-advisory", Faults: []string{FaultKill, FaultPause, FaultStall, FaultReset, FaultBackend}, ConnectionBound: true},
	{Name: "postgres-table", Faults: []string{FaultKill, FaultPause, FaultStall, FaultReset, FaultBackend}},
	{Name: "mysql-advisory", Faults: []string{FaultKill, FaultPause, FaultStall, FaultReset, FaultBackend}, ConnectionBound: true},
	{Name: "mysql-table", Faults: []string{FaultKill, FaultPause, FaultStall, FaultReset, FaultBackend}},
	{Name: "etcd", Faults: []string{FaultKill, FaultPause, FaultStall, FaultReset, FaultLeaderKill, FaultMemberPause}},
}

// ModeOf returns the mode named name.
func ModeOf(name string) (Mode, bool) {
	i := slices.IndexFunc(Modes, func(m Mode) bool { return m.Name == name })
	if i < 0 {
		return Mode{}, false
	}
	return Modes[i], true
}

// Config is one run.
type Config struct {
	// Store is the mode's name (see Modes).
	Store string
	// Duration is how long the holders contend and the faults run.
	Duration time.Duration
	// Procs child processes (goroutine groups in memory mode), each with
	// Workers holder loops, contend on Locks locks.
	Procs, Workers, Locks int
	// TTL is the locks' ttl.
	TTL time.Duration
	// Faults are the faults to inject, at random; nil: every fault of the
	// mode. An empty non-nil list injects none.
	Faults []string
	// Seed seeds the choice of faults and their targets; 0: random.
	Seed uint64
}

// ErrConfig is wrapped by every invalid Config's error.
var ErrConfig = errors.New("faultsuite: invalid configuration")

// Validate checks c and fills in Faults; its errors name the flag.
func (c *Config) Validate() error {
	m, ok := ModeOf(c.Store)
	if !ok {
		names := make([]string, len(Modes))
		for i, m := range Modes {
			names[i] = m.Name
		}
		return fmt.Errorf("%w: -store %q is unknown (one of %s)", ErrConfig, c.Store, strings.Join(names, ", "))
	}
	switch {
	case c.Duration <= 0:
		return fmt.Errorf("%w: -duration must be positive, not %v", ErrConfig, c.Duration)
	case c.Procs < 1 || c.Procs > 64:
		return fmt.Errorf("%w: -procs must be 1 to 64, not %d", ErrConfig, c.Procs)
	case c.Workers < 1 || c.Workers > 64:
		return fmt.Errorf("%w: -workers must be 1 to 64, not %d", ErrConfig, c.Workers)
	case c.Locks < 1 || c.Locks > 1000:
		return fmt.Errorf("%w: -locks must be 1 to 1000, not %d", ErrConfig, c.Locks)
	case c.TTL < 100*time.Millisecond:
		return fmt.Errorf("%w: -ttl must be at least 100ms, not %v", ErrConfig, c.TTL)
	}
	if c.Faults == nil {
		c.Faults = slices.Clone(m.Faults)
	}
	for _, f := range c.Faults {
		if !slices.Contains(m.Faults, f) {
			return fmt.Errorf("%w: -faults: %q does not apply to store %s (its faults: %s)",
				ErrConfig, f, m.Name, strings.Join(m.Faults, ","))
		}
	}
	return nil
}

// ParseFaults reads -faults: "all", "none" or a comma-separated list.
func ParseFaults(s string) []string {
	switch strings.TrimSpace(s) {
	case "", "all":
		return nil
	case "none":
		return []string{}
	}
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
