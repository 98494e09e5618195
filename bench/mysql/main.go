// Command mysql measures the mutexfx MySQL/MariaDB driver against the bare
// statements it is built on, side by side in one run:
//
//	cd bench && go run ./mysql [-dsn root@tcp(127.0.0.1:3306)/test] [-n 2000] [-only latency,handoff,renewal]
//
// Latencies are measured on one pinned connection (bare statements) or
// through the driver and the component, interleaved round by round (in a
// new random order each round) so that the machine's noise hits every row
// alike; the table reports medians and ratios. Then: hand-off between 8 contending workers holding 1 ms (in one
// process and in 8 processes), and the renewal of 10,000 table-mode locks.
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/mutexfx/mutexfx/bench/internal/stats"
)

var (
	dsn   = flag.String("dsn", "root@tcp(127.0.0.1:3306)/test", "go-sql-driver DSN of the database to use")
	n     = flag.Int("n", 2000, "rounds of the latency measurements")
	procs = flag.Int("workers", 8, "contending workers of the hand-off measurements")
	hold  = flag.Duration("hold", time.Millisecond, "how long each hand-off worker holds the lock")
	turns = flag.Int("turns", 100, "acquisitions per hand-off worker")
	rows  = flag.Int("rows", 10000, "held locks of the renewal measurement")
	reps  = flag.Int("reps", 3, "runs of each hand-off configuration")
	only  = flag.String("only", "latency,handoff,renewal", "parts to run, comma-separated")
	hmode = flag.String("handoff-mode", "", "hand-off: run only this mode's configurations (advisory or table)")
	hin   = flag.String("handoff-in", "", "hand-off: run only the configurations in one process (1) or in -workers processes (n)")
	hfair = flag.Bool("handoff-after-only", false, "hand-off: skip table mode's fair hand-off off (before) configurations")
)

// part reports whether -only names part.
func part(name string) bool { return slices.Contains(strings.Split(*only, ","), name) }

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-handoff-worker" {
		os.Exit(handoffWorker(os.Args[2:]))
	}
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	fmt.Printf("MySQL driver benchmark: %s, %d rounds, %s\n\n", server(), *n, time.Now().Format(time.RFC3339))
	if part("latency") {
		lat, err := latencies()
		if err != nil {
			return err
		}
		printLatencies(lat)
		fmt.Println()
	}
	if part("handoff") {
		if err := handoffs(); err != nil {
			return err
		}
		fmt.Println()
	}
	if part("renewal") {
		return renewal()
	}
	return nil
}

// pct is stats.Percentile.
var pct = stats.Percentile

// med is stats.Median: the median of repeated runs' results.
var med = stats.Median

func us(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond)) }
func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
