// Command etcd measures the mutexfx etcd driver (through the component)
// against etcd's own client/v3/concurrency Mutex, side by side in one run on
// the same cluster:
//
//	cd bench && go run ./etcd [-members 3] [-endpoints host:port,...] [-n 2000] [-duration 4s] [-repeat 3]
//
// Without -endpoints it starts a throwaway cluster of -members members from
// the etcd binary on loopback ports. It prints, per run: acquire+release
// p50 and p99 of each library, in µs and in multiples of a linearizable Get
// (rounds interleaved across the libraries so that the machine's noise hits
// both alike), and 8 worker processes (this binary re-executed) contending
// for one lock holding it 1 ms: the wait's p99, how often the worker that
// just released takes the lock again (same-again), and acquisitions per
// second. With -repeat, a last table gives the medians of the runs.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

var (
	endpoints = flag.String("endpoints", "", "cluster client addresses, comma-separated (empty: start a throwaway cluster)")
	members   = flag.Int("members", 3, "members of the throwaway cluster")
	n         = flag.Int("n", 2000, "rounds of the latency measurement")
	workers   = flag.Int("workers", 8, "contending worker processes")
	duration  = flag.Duration("duration", 4*time.Second, "length of each contention run")
	hold      = flag.Duration("hold", time.Millisecond, "how long a worker holds the lock")
	repeat    = flag.Int("repeat", 1, "runs; the last table shows their medians")
)

// libs are the measured libraries, mutexfx first.
var libs = []string{"mutexfx", "concurrency"}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-worker" {
		os.Exit(workerMain(os.Args[2:]))
	}
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	eps := strings.Split(*endpoints, ",")
	if *endpoints == "" {
		c, err := startCluster(*members)
		if err != nil {
			return err
		}
		defer c.stop()
		eps = c.endpoints
	}
	fmt.Printf("etcd lock benchmark: %d member(s) at %s, %d latency rounds, contention %d processes × %v holding %v, %d run(s)\n\n",
		len(eps), strings.Join(eps, ","), *n, *workers, *duration, *hold, *repeat)
	var lats []latency
	var conts [][]contention
	for r := range max(*repeat, 1) {
		lat, err := latencies(eps)
		if err != nil {
			return err
		}
		var cs []contention
		for _, lib := range libs {
			c, err := contendProcesses(lib, eps)
			if err != nil {
				return fmt.Errorf("%s contention: %w", lib, err)
			}
			cs = append(cs, c)
		}
		fmt.Printf("run %d\n", r+1)
		printTable(lat, cs)
		lats, conts = append(lats, lat), append(conts, cs)
	}
	if len(lats) > 1 {
		fmt.Printf("medians of %d runs\n", len(lats))
		printTable(medianLatency(lats), medianContention(conts))
	}
	return nil
}
