//go:build linux

// Command faultsuite runs mutexfx's multi-process fault suite against one
// store mode and prints what the checker finds: child processes contend on
// shared locks through fault-injecting proxies while holders are killed,
// paused, their links stalled or reset and the store restarted, failed
// over or its backends killed. It exits 1 when a goal of the suite is
// missed, 2 on bad input. See docs/faults.md.
//
//	go run ./internal/faultsuite/cmd/faultsuite -store redis -duration 60s
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/internal/faultsuite"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

func main() {
	if faultsuite.IsChild() {
		os.Exit(faultsuite.RunChild())
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	code, err := runErr(args, stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, err)
	}
	return code
}

func runErr(args []string, stdout, stderr io.Writer) (int, error) {
	fs := flag.NewFlagSet("faultsuite", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg faultsuite.Config
	var faults, history string
	var explain int
	fs.StringVar(&cfg.Store, "store", "", "store mode: file, memory, redis, sentinel, cluster, postgres-advisory, postgres-table, mysql-advisory, mysql-table, etcd (required)")
	fs.DurationVar(&cfg.Duration, "duration", time.Minute, "how long the holders contend under faults")
	fs.IntVar(&cfg.Procs, "procs", 4, "child processes")
	fs.IntVar(&cfg.Workers, "workers", 4, "holder loops per process")
	fs.IntVar(&cfg.Locks, "locks", 3, "shared locks")
	fs.DurationVar(&cfg.TTL, "ttl", time.Second, "the locks' ttl")
	fs.StringVar(&faults, "faults", "all", `faults to inject: "all", "none" or a comma-separated list of kill, pause, stall, reset, restart, failover, lagfailover, backend, leaderkill, memberpause`)
	fs.Uint64Var(&cfg.Seed, "seed", 0, "seed of the fault schedule (0: random)")
	fs.StringVar(&history, "history", "", "write the history as JSON lines to this file")
	fs.IntVar(&explain, "explain", 3, "print the events around this many overlaps")
	if err := fs.Parse(args); err != nil {
		return 2, nil // flag printed it
	}
	if fs.NArg() > 0 {
		return 2, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg.Faults = faultsuite.ParseFaults(faults)
	if err := cfg.Validate(); err != nil {
		return 2, err
	}
	mode, _ := faultsuite.ModeOf(cfg.Store)
	if err := mode.CheckBinaries(); err != nil {
		return 2, err
	}
	exe, err := os.Executable()
	if err != nil {
		return 2, err
	}
	newChild := func(env []string) *exec.Cmd {
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), env...)
		cmd.Stderr = stderr
		return cmd
	}
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, format+"\n", a...) }
	var res faultsuite.Result
	tb := testutil.NewCommandTB("faultsuite")
	err = tb.Run(func(tb testing.TB) error {
		var err error
		res, err = faultsuite.Run(tb, cfg, newChild, logf)
		return err
	})
	if err != nil {
		return 2, err
	}
	r := res.Report
	fmt.Fprintf(stdout, "store %s, %v, %d procs × %d workers × %d locks, ttl %v\n%s\n",
		cfg.Store, cfg.Duration, cfg.Procs, cfg.Workers, cfg.Locks, cfg.TTL, r.Summary())
	for i, o := range r.Overlaps {
		if i >= explain {
			break
		}
		fmt.Fprintf(stdout, "overlap of %v on %s:\n%s", o.Duration, o.Lock, faultsuite.Explain(res.History, o))
	}
	if history != "" {
		if err := faultsuite.WriteHistory(history, res.History); err != nil {
			return 2, err
		}
	}
	missed := mode.Missed(r)
	if len(res.ChildErrors) > 0 {
		missed = append(missed, "children failed: "+strings.Join(res.ChildErrors, "; "))
	}
	if len(missed) > 0 {
		fmt.Fprintf(stdout, "GOALS MISSED:\n%s\n", strings.Join(missed, "\n"))
		return 1, nil
	}
	fmt.Fprintln(stdout, "goals met")
	return 0, nil
}
