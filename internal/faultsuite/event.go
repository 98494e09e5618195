//go:build linux

package faultsuite

import (
	"golang.org/x/sys/unix"
)

// Kind is what an Event records.
type Kind string

// Event kinds. A holder's life is Acquired, then Writes, then Lost (told
// lost) or Releasing and Released. Faults are recorded by the parent.
const (
	// Acquired: Acquire returned the lock (Fence set).
	Acquired Kind = "acquired"
	// Lost: the holder was told the lock was lost (its context ended or
	// Lock.Err returned an error).
	Lost Kind = "lost"
	// Ended: the child's Mutex ended a lock as lost (Proc, Lock, Fence;
	// Detail: the cause), stamped before the lock's context is cancelled
	// and under the Mutex's lock: from then on Lock.Err returns an error.
	// A holder's Lost comes later, when its goroutine next runs.
	Ended Kind = "ended"
	// Releasing: the holder stops using the lock and calls Release.
	Releasing Kind = "releasing"
	// Released: Release returned (OK: it released the lock in the store).
	Released Kind = "released"
	// AcquireError: Acquire failed with an error other than a timeout.
	AcquireError Kind = "acquireError"
	// Write: the register took (OK) or refused a write (recorded by the
	// register, in its order: Seq).
	Write Kind = "write"
	// Killed: the parent sent SIGKILL to Proc.
	Killed Kind = "killed"
	// Stopped and Continued: the parent sent SIGSTOP / SIGCONT to Proc.
	Stopped   Kind = "stopped"
	Continued Kind = "continued"
	// Fault: any other fault (Detail names it: stall, resume, reset,
	// restart, failover, backend).
	Fault Kind = "fault"
)

// Event is one entry of a history.
type Event struct {
	// T is CLOCK_MONOTONIC in nanoseconds when the event happened (taken by
	// the process where it happened).
	T int64 `json:"t"`
	// Kind says what happened.
	Kind Kind `json:"k"`
	// Proc is the process incarnation ("p2.1": process slot 2, first
	// restart) of a holder event, or the target of a fault.
	Proc string `json:"p,omitempty"`
	// Holder identifies one grant: a process incarnation, worker and
	// sequence number ("p2.1/w3/17").
	Holder string `json:"h,omitempty"`
	// Lock is the lock's name.
	Lock string `json:"l,omitempty"`
	// Fence is the grant's fence (Acquired, Write).
	Fence uint64 `json:"f,omitempty"`
	// OK is a write's or a release's outcome.
	OK bool `json:"ok,omitempty"`
	// Seq orders the register's writes.
	Seq int64 `json:"s,omitempty"`
	// Detail is a fault's name or an error's text.
	Detail string `json:"d,omitempty"`
}

// Now returns CLOCK_MONOTONIC in nanoseconds. On Linux every process of a
// host reads the same clock, so the children's and the parent's readings
// compare directly (and unlike the wall clock it never steps).
func Now() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}
