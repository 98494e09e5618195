//go:build linux

// Package faultsuite is mutexfx's multi-process fault suite: child
// processes contend on a few shared locks of one store, each through its
// own fault-injecting TCP proxy, and write to a fenced register while the
// suite kills, pauses and cuts them and restarts or fails over the store.
// Every event is recorded on one clock (CLOCK_MONOTONIC, shared by the
// processes of a host) and a checker reads the history for stale-fence
// writes accepted, unsignalled overlaps, fences out of order, the margin
// between "told lost" and the next grant, and the recovery time after a
// holder's death.
//
// Run drives one run; Check reads a history; cmd/faultsuite is the long-run
// command. See docs/faults.md.
package faultsuite
