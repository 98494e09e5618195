package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mutexfx/mutexfx/bench/internal/stats"
)

// contention summarises one contention run.
type contention struct {
	waitP99   time.Duration
	sameAgain float64 // share of acquisitions by the worker that made the previous one
	perSec    float64
}

// record is one acquisition: when the worker started waiting, got the lock
// and started releasing it (Unix ns, one host's clock), and which worker.
type record struct {
	start, got, rel int64
	id              int
}

// contendProcesses runs *workers worker processes (this binary with
// -worker) taking one lock of lib in turn, started together.
func contendProcesses(lib string, eps []string) (contention, error) {
	exe, err := os.Executable()
	if err != nil {
		return contention{}, err
	}
	name := fmt.Sprintf("contend-%s-%d", lib, time.Now().UnixNano())
	start := time.Now().Add(3 * time.Second) // time to start and warm up
	var outs []*bytes.Buffer
	var cmds []*exec.Cmd
	for id := range *workers {
		var out bytes.Buffer
		cmd := exec.Command(exe, "-worker", lib, strings.Join(eps, ","), name,
			strconv.FormatInt(start.UnixNano(), 10), duration.String(), hold.String(), strconv.Itoa(id))
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
	var all []record
	for _, out := range outs {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 4 {
				return contention{}, fmt.Errorf("worker said %q", sc.Text())
			}
			id, _ := strconv.Atoi(f[0])
			s, _ := strconv.ParseInt(f[1], 10, 64)
			g, _ := strconv.ParseInt(f[2], 10, 64)
			r, _ := strconv.ParseInt(f[3], 10, 64)
			all = append(all, record{start: s, got: g, rel: r, id: id})
		}
	}
	return summarize(all, start)
}

// stop kills and reaps worker processes not yet waited for.
func stop(cmds []*exec.Cmd) {
	for _, cmd := range cmds {
		_ = cmd.Process.Kill()
	}
	for _, cmd := range cmds {
		_ = cmd.Wait()
	}
}

// workerMain is one worker process: lib endpoints name startUnixNano duration hold id.
func workerMain(args []string) int {
	if len(args) != 7 {
		fmt.Fprintln(os.Stderr, "worker: bad arguments")
		return 2
	}
	lib, eps, name := args[0], strings.Split(args[1], ","), args[2]
	startNs, _ := strconv.ParseInt(args[3], 10, 64)
	d, _ := time.ParseDuration(args[4])
	h, _ := time.ParseDuration(args[5])
	id, _ := strconv.Atoi(args[6])
	lk, err := open(lib, eps)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	defer lk.close()
	ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
	defer cancel()
	unlock, err := lk.lock(ctx, fmt.Sprintf("%s-warm-%d", name, id))
	if err == nil {
		err = unlock(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	begin := time.Unix(0, startNs)
	if time.Now().After(begin) {
		fmt.Fprintln(os.Stderr, "worker: ready after the start time")
		return 1
	}
	time.Sleep(time.Until(begin))
	end := begin.Add(d)
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	for time.Now().Before(end) {
		s := time.Now()
		unlock, err := lk.lock(ctx, name)
		if err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			return 1
		}
		g := time.Now()
		time.Sleep(h)
		r := time.Now()
		if err := unlock(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			return 1
		}
		fmt.Fprintf(w, "%d %d %d %d\n", id, s.UnixNano(), g.UnixNano(), r.UnixNano())
	}
	return 0
}

// summarize summarises a run that started at start and lasted *duration.
// It fails a run with fewer than two acquisitions, and one whose holders
// overlapped (a holder that got the lock before the previous one started
// its release: every worker reads the same machine's clock).
func summarize(all []record, start time.Time) (contention, error) {
	if len(all) < 2 {
		return contention{}, fmt.Errorf("%d acquisitions, want at least 2", len(all))
	}
	slices.SortFunc(all, func(a, b record) int { return cmp.Compare(a.got, b.got) })
	from, to := start.UnixNano(), start.Add(*duration).UnixNano()
	var waits []time.Duration
	same, inRun := 0, 0
	for i, r := range all {
		waits = append(waits, time.Duration(r.got-r.start))
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
	}
	return contention{
		waitP99:   stats.Percentile(waits, 99),
		sameAgain: float64(same) / float64(len(all)-1),
		perSec:    float64(inRun) / duration.Seconds(),
	}, nil
}
