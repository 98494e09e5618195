package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/postgres"
)

// handoffWorkers runs workers goroutines on m taking name in turn, holding
// it 1 ms, and returns their waits.
func handoffWorkers(ctx context.Context, m *component.Mutex, name string, workers, each int) []time.Duration {
	var mu sync.Mutex
	var waits []time.Duration
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				start := time.Now()
				l, err := m.Acquire(ctx, name, component.WithTimeout(30*time.Second))
				if err != nil {
					panic(err)
				}
				w := time.Since(start)
				time.Sleep(time.Millisecond)
				must(l.Release(ctx))
				mu.Lock()
				waits = append(waits, w)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return waits
}

// warm makes the measured hand-offs start with their connections open: a
// waiting acquisition through m, then (table mode) d takes a private lock,
// queues for it (Wait > 0) and releases it until d's LISTEN connection hears
// the release (a table release notifies when a driver is queued; advisory
// waiters wait in the server and need no LISTEN).
func warm(ctx context.Context, d *postgres.Driver, m *component.Mutex) {
	// a waiting acquisition of a private name: opens the connection the
	// measured ones use (advisory: a waiter session; table: the pool)
	l := must(m.Acquire(ctx, "warm:"+rand.Text(), component.WithTimeout(10*time.Second)))
	must(l.Release(ctx))
	if d.Mode() != postgres.ModeTable {
		return
	}
	key := "warm:" + rand.Text()
	heard := make(chan struct{}, 1)
	cancel := must(d.Subscribe(ctx, func(ev drivers.Event) {
		if ev.Kind == drivers.Released && ev.Key == key {
			select {
			case heard <- struct{}{}:
			default:
			}
		}
	}))
	defer cancel()
	for {
		req := drivers.AcquireRequest{Key: key, Token: "holder", TTL: time.Minute}
		if res := must(d.Acquire(ctx, req)); !res.Acquired {
			panic("warm-up lock taken")
		}
		req.Token, req.Wait = "waiter", time.Millisecond
		must(d.Acquire(ctx, req))
		must(d.Release(ctx, key, "holder"))
		select {
		case <-heard:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func childWorker(ctx context.Context, mode string) {
	d := newDriver(postgres.Options{URL: *dsn, Mode: mode, Table: "mutexfx_bench_logged"})
	m := newMutex(d, 5*time.Second)
	warm(ctx, d, m)
	// wait for the go signal so that every process contends from the start
	fmt.Println("ready")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	waits := handoffWorkers(ctx, m, "handoff-8p-"+mode, 1, *handoff)
	for _, w := range waits {
		fmt.Println(int64(w))
	}
	_ = m.Close(ctx)
	_ = d.Close(ctx)
}

func handoffProcesses(mode string) []time.Duration {
	exe := must(os.Executable())
	type proc struct {
		cmd *exec.Cmd
		out *bufio.Scanner
		in  interface{ Close() error }
	}
	var procs []proc
	for range 8 {
		cmd := exec.Command(exe, "-child", mode, "-dsn", *dsn, "-handoff", strconv.Itoa(*handoff))
		cmd.Stderr = os.Stderr
		stdout := must(cmd.StdoutPipe())
		stdin := must(cmd.StdinPipe())
		must(0, cmd.Start())
		sc := bufio.NewScanner(stdout)
		if !sc.Scan() || sc.Text() != "ready" {
			panic("child not ready")
		}
		procs = append(procs, proc{cmd, sc, stdin})
	}
	for _, p := range procs {
		_ = p.in.Close() // go
	}
	var waits []time.Duration
	for _, p := range procs {
		for p.out.Scan() {
			v, err := strconv.ParseInt(strings.TrimSpace(p.out.Text()), 10, 64)
			must(0, err)
			waits = append(waits, time.Duration(v))
		}
		must(0, p.cmd.Wait())
	}
	return waits
}
