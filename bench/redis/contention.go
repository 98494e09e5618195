package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// contention summarises one contention run.
type contention struct {
	waitP99, waitMax time.Duration
	sameAgain        float64 // share of acquisitions by the worker that made the previous one
	perSec           float64
	handOff          time.Duration // p50 from a holder starting its release to the next holder having the lock
	release          time.Duration // p50 of the release call in the releasing worker
	// CPU time per acquisition (separate processes only): of the worker
	// processes while they contended, and of the Redis server from the
	// run's start (after the workers' warm-up) until the workers exited.
	workerCPU, serverCPU time.Duration
	// The run's lock name, its start and end, and its acquisitions (in
	// the run or not): what scriptCosts needs to pick the run's commands.
	name         string
	start, end   time.Time
	acquisitions int
	err          error // the run failed
}

// record is one acquisition: when the worker started waiting, when it got
// the lock, when it started releasing it and when the release returned
// (Unix ns, one host's clock), and which worker.
type record struct {
	start, got, rel, done int64
	id                    int
}

// work acquires name, holds it, releases it, again and again until end. A
// failed release ends it with the error.
func work(ctx context.Context, lk locker, name string, id int, end time.Time) ([]record, error) {
	var recs []record
	for time.Now().Before(end) {
		start := time.Now()
		unlock, err := lk.lock(ctx, name)
		if errors.Is(err, errRunOver) {
			return recs, nil
		}
		if err != nil {
			return recs, err
		}
		got := time.Now()
		time.Sleep(*hold)
		rel := time.Now()
		if err := unlock(); err != nil {
			return recs, err
		}
		recs = append(recs, record{start: start.UnixNano(), got: got.UnixNano(), rel: rel.UnixNano(), done: time.Now().UnixNano(), id: id})
	}
	return recs, nil
}

func contendInProcess(lib string) (contention, error) {
	lk, err := open(lib, *addr)
	if err != nil {
		return contention{}, err
	}
	defer lk.close()
	ctx, cancel := context.WithTimeout(context.Background(), *duration+15*time.Second)
	defer cancel()
	name := fmt.Sprintf("contend:%s:%d", lib, time.Now().UnixNano())
	unlock, err := lk.lock(ctx, name) // warm-up: scripts, pools, subscription
	if err == nil {
		err = unlock()
	}
	if err != nil {
		return contention{}, err
	}
	start := time.Now()
	end := start.Add(*duration)
	var mu sync.Mutex
	var all []record
	var firstErr error
	var wg sync.WaitGroup
	for id := range *workers {
		wg.Go(func() {
			recs, err := work(ctx, lk, name, id, end)
			mu.Lock()
			defer mu.Unlock()
			all = append(all, recs...)
			if err != nil && firstErr == nil {
				firstErr = err
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return contention{}, firstErr
	}
	return summarize(all, start)
}

// contendProcesses runs the workers in separate processes (this binary
// with -worker), started together.
func contendProcesses(lib string) (contention, error) {
	exe, err := os.Executable()
	if err != nil {
		return contention{}, err
	}
	name := fmt.Sprintf("contend:%s:procs:%d", lib, time.Now().UnixNano())
	start := time.Now().Add(2 * time.Second) // time to start and warm up
	// The server's CPU from the run's start (after the workers' warm-up);
	// every client of the server in the run counts: run on a quiet one.
	type sample struct {
		cpu time.Duration
		err error
	}
	atStart := make(chan sample, 1) // buffered: the sampler ends even when this returns early
	go func() {
		time.Sleep(time.Until(start))
		c, err := serverCPU(context.Background(), *addr)
		atStart <- sample{c, err}
	}()
	var outs []*bytes.Buffer
	var cmds []*exec.Cmd
	for id := range *workers {
		var out bytes.Buffer
		cmd := exec.Command(exe, "-worker", lib, *addr, name, strconv.FormatInt(start.UnixNano(), 10),
			duration.String(), hold.String(), strconv.Itoa(id), strconv.Itoa(*workers))
		cmd.Stdout, cmd.Stderr = &out, os.Stderr
		if err := cmd.Start(); err != nil {
			stop(cmds)
			return contention{}, err
		}
		outs, cmds = append(outs, &out), append(cmds, cmd)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			stop(cmds[i+1:])
			return contention{}, fmt.Errorf("worker: %w", err)
		}
	}
	server1, err := serverCPU(context.Background(), *addr)
	if err != nil {
		return contention{}, err
	}
	s0 := <-atStart
	if s0.err != nil {
		return contention{}, s0.err
	}
	server0 := s0.cpu
	var all []record
	var workerCPU time.Duration
	for _, out := range outs {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 2 && f[0] == "cpu" {
				ns, _ := strconv.ParseInt(f[1], 10, 64)
				workerCPU += time.Duration(ns)
				continue
			}
			if len(f) != 5 {
				return contention{}, fmt.Errorf("worker said %q", sc.Text())
			}
			id, _ := strconv.Atoi(f[0])
			s, _ := strconv.ParseInt(f[1], 10, 64)
			g, _ := strconv.ParseInt(f[2], 10, 64)
			r, _ := strconv.ParseInt(f[3], 10, 64)
			dn, _ := strconv.ParseInt(f[4], 10, 64)
			all = append(all, record{start: s, got: g, rel: r, done: dn, id: id})
		}
	}
	c, err := summarize(all, start)
	c.name, c.start, c.end, c.acquisitions = name, start, start.Add(*duration), len(all)
	c.workerCPU = workerCPU / time.Duration(max(len(all), 1))
	c.serverCPU = (server1 - server0) / time.Duration(max(len(all), 1))
	return c, err
}

// stop kills and reaps the worker processes cmds (started, not yet
// waited for), so that none keeps loading Redis during the next run.
func stop(cmds []*exec.Cmd) {
	for _, cmd := range cmds {
		_ = cmd.Process.Kill()
	}
	for _, cmd := range cmds {
		_ = cmd.Wait()
	}
}

// workerMain is one worker process: lib addr name startUnixNano duration hold id workers.
func workerMain(args []string) int {
	if len(args) != 8 {
		fmt.Fprintln(os.Stderr, "worker: bad arguments")
		return 2
	}
	lib, a, name := args[0], args[1], args[2]
	startNs, _ := strconv.ParseInt(args[3], 10, 64)
	d, _ := time.ParseDuration(args[4])
	h, _ := time.ParseDuration(args[5])
	id, _ := strconv.Atoi(args[6])
	nw, _ := strconv.Atoi(args[7])
	*hold = h
	lk, err := openWorker(lib, a, name, id, nw, time.Unix(0, startNs).Add(d))
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	defer lk.close()
	ctx, cancel := context.WithTimeout(context.Background(), d+15*time.Second)
	defer cancel()
	unlock, err := lk.lock(ctx, fmt.Sprintf("%s:warm:%d", name, id))
	if err == nil {
		err = unlock()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	if time.Now().After(time.Unix(0, startNs)) {
		// fewer workers would contend at the start, unseen
		fmt.Fprintln(os.Stderr, "worker: ready after the start time")
		return 1
	}
	time.Sleep(time.Until(time.Unix(0, startNs)))
	cpu := cpuTime()
	recs, err := work(ctx, lk, name, id, time.Unix(0, startNs).Add(d))
	cpu = cpuTime() - cpu
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	w := bufio.NewWriter(os.Stdout)
	for _, r := range recs {
		fmt.Fprintf(w, "%d %d %d %d %d\n", r.id, r.start, r.got, r.rel, r.done)
	}
	fmt.Fprintf(w, "cpu %d\n", cpu.Nanoseconds())
	_ = w.Flush()
	return 0
}

// summarize summarises the records of a run that started at start and
// lasted *duration, sorting them by acquisition time. Acquisitions per
// second count only the locks got within the run. It fails a run with fewer
// than two acquisitions, and one whose holders overlapped: a holder that
// got the lock before the previous holder started its release, with no
// tolerance (every worker, in this process or another, reads the same
// machine's clock with time.Now). The release's start, not its end, is the
// bound: the next holder may have the lock before the releasing call
// returns.
func summarize(all []record, start time.Time) (contention, error) {
	if len(all) < 2 {
		return contention{}, fmt.Errorf("%d acquisitions, want at least 2", len(all))
	}
	slices.SortFunc(all, func(a, b record) int { return cmp.Compare(a.got, b.got) })
	from, to := start.UnixNano(), start.Add(*duration).UnixNano()
	var waits, gaps, rels []time.Duration
	same, inRun := 0, 0
	for i, r := range all {
		waits = append(waits, time.Duration(r.got-r.start))
		rels = append(rels, time.Duration(r.done-r.rel))
		if from <= r.got && r.got <= to {
			inRun++
		}
		if i == 0 {
			continue
		}
		prev := all[i-1]
		if r.got < prev.rel {
			return contention{}, fmt.Errorf("holders overlapped: worker %d got the lock %v before worker %d started releasing it",
				r.id, time.Duration(prev.rel-r.got), prev.id)
		}
		if prev.id == r.id {
			same++
		}
		gaps = append(gaps, time.Duration(r.got-prev.rel))
	}
	return contention{
		waitP99:   p(waits, 99),
		waitMax:   p(waits, 100),
		sameAgain: float64(same) / float64(len(all)-1),
		perSec:    float64(inRun) / duration.Seconds(),
		handOff:   p(gaps, 50),
		release:   p(rels, 50),
	}, nil
}

// runProcs is the -procs run: the ring and each library contending in
// processes, -repeat times, one line per run and library, no table.
func runProcs() error {
	fmt.Printf("Redis contention in processes: %s, %d workers × %v holding %v, %d run(s)\n",
		*addr, *workers, *duration, *hold, *repeat)
	for r := range max(*repeat, 1) {
		for _, lib := range append([]string{ring}, libs...) {
			c, err := contendProcesses(lib)
			if err != nil {
				fmt.Printf("run %d %s: failed: %v\n", r+1, lib, err)
				continue
			}
			fmt.Printf("run %d %s: %.0f/s p99 %s same %.0f%% hand-off %.0fµs release %.0fµs cpu %s\n", r+1, lib,
				c.perSec, ms(c.waitP99), 100*c.sameAgain, float64(c.handOff)/float64(time.Microsecond),
				float64(c.release)/float64(time.Microsecond), cpuPerAcq(c))
		}
	}
	return nil
}
