// Command redis measures the mutexfx Redis driver (through the component)
// against redsync v4, bsm/redislock and rueidislock, side by side in one run
// on the same Redis server:
//
//	cd bench && go run ./redis [-addr 127.0.0.1:6379] [-duration 4s] [-n 2000] [-repeat 3]
//
// It prints one table (with -repeat, the medians of the runs, each run's
// main numbers printed before it): acquire+release p50 in multiples of the
// PING round trip (rounds interleaved across the libraries so that the
// machine's noise hits all alike; also the mutexfx driver called without
// the component); 8 workers contending for one lock holding it 1 ms, in
// one process (goroutines sharing one component or client) and in 8
// processes (this binary re-executed), with the wait's p99 and max, how
// often the worker that just released takes the lock again, and
// acquisitions per second; and the renewal of 10,000 locks held by one
// component (round trips per renewal period, CPU of the process). Two
// floors measured in the same run frame the goals: two PINGs in a row, and
// a Pub/Sub message to another process asleep between messages (the least
// a fair hand-off across processes costs), and a baton passed round 8
// processes by Pub/Sub with the same holds (the most acquisitions/s a fair
// hand-off across processes reaches here). A last mutexfx process run with
// SLOWLOG logging every command prints the commands (mutexfx's scripts by
// name) per acquisition and the server's time in each; it sets the
// server's slowlog-log-slower-than and slowlog-max-len for that run, and
// restores them.
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

var (
	addr     = flag.String("addr", "127.0.0.1:6379", "Redis server address")
	n        = flag.Int("n", 2000, "rounds of the latency measurement")
	workers  = flag.Int("workers", 8, "contending workers")
	duration = flag.Duration("duration", 4*time.Second, "length of each contention run")
	hold     = flag.Duration("hold", time.Millisecond, "how long a worker holds the lock")
	nlocks   = flag.Int("locks", 10000, "held locks of the renewal measurement")
	ttl      = flag.Duration("ttl", 3*time.Second, "lock ttl of the renewal measurement (renewed every ttl/3)")
	repeat   = flag.Int("repeat", 1, "runs of the latency and contention measurements; the table shows their medians")
	only     = flag.String("libs", "", "measure only these libraries (comma-separated, mutexfx among them; empty: all)")
	procs    = flag.Bool("procs", false, "run only the contention in processes (the ring, then each library), -repeat times, and print each run")
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "-worker":
			os.Exit(workerMain(os.Args[2:]))
		case "-wakee":
			os.Exit(wakeeMain(os.Args[2:]))
		case "-renewer":
			os.Exit(renewerMain(os.Args[2:]))
		}
	}
	flag.Parse()
	if *only != "" {
		libs = slices.DeleteFunc(libs, func(l string) bool { return !slices.Contains(strings.Split(*only, ","), l) })
		if len(libs) == 0 || libs[0] != "mutexfx" {
			fmt.Fprintln(os.Stderr, "bench: -libs must name mutexfx (the table compares the others with it)")
			os.Exit(2)
		}
	}
	do := run
	if *procs {
		do = runProcs
	}
	if err := do(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	fmt.Printf("Redis lock benchmark: %s, %d latency rounds, contention %d workers × %v holding %v, %d run(s), %s\n\n",
		*addr, *n, *workers, *duration, *hold, *repeat, time.Now().Format(time.RFC3339))
	var lats []latency
	var ins, procss [][]contention
	for r := range max(*repeat, 1) {
		lat, err := latencies()
		if err != nil {
			return err
		}
		if lat.wake, err = wakeFloor(); err != nil {
			return fmt.Errorf("wake-up floor: %w", err)
		}
		if lat.ring, err = contendProcesses(ring); err != nil {
			return ringErr(err)
		}
		var in, procs []contention
		for _, lib := range libs {
			// A library failing a run is reported in the table, not fatal.
			c, err := contendInProcess(lib)
			if err != nil {
				fmt.Fprintf(os.Stderr, "bench: %s in process: %v\n", lib, err)
				c.err = err
			}
			in = append(in, c)
			p, err := contendProcesses(lib)
			if err != nil {
				fmt.Fprintf(os.Stderr, "bench: %s in processes: %v\n", lib, err)
				p.err = err
			}
			procs = append(procs, p)
		}
		printRun(r, lat, in, procs)
		lats, ins, procss = append(lats, lat), append(ins, in), append(procss, procs)
	}
	costs, err := scriptCosts()
	if err != nil { // reported, as a failed contention run is
		fmt.Fprintln(os.Stderr, "bench: server time per script:", err)
	}
	rn, err := renewal()
	if err != nil { // reported in the table, as a failed contention run is
		fmt.Fprintln(os.Stderr, "bench: renewal:", err)
		rn.err = err
	}
	fmt.Println()
	printTable(medianLatency(lats), medianContention(ins), medianContention(procss), rn)
	printScriptCosts(costs)
	return nil
}
