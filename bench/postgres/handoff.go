package main

import (
	"bufio"
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/postgres"
)

// turn is one acquisition of a hand-off run: how long it waited, and when
// (Unix ns, comparable across processes) it got the lock and its release
// started and returned.
type turn struct {
	wait                  time.Duration
	got, relStart, relEnd int64
}

// handoffWorkers runs workers goroutines on m taking name in turn, holding
// it 1 ms, and returns their turns.
func handoffWorkers(ctx context.Context, m *component.Mutex, name string, workers, each int) []turn {
	var mu sync.Mutex
	var turns []turn
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				start := time.Now()
				l, err := m.Acquire(ctx, name, component.WithTimeout(30*time.Second))
				if err != nil {
					panic(err)
				}
				got := time.Now()
				time.Sleep(time.Millisecond)
				relStart := time.Now()
				must(l.Release(ctx))
				t := turn{got.Sub(start), got.UnixNano(), relStart.UnixNano(), time.Now().UnixNano()}
				mu.Lock()
				turns = append(turns, t)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return turns
}

// phases splits turns into their waits and, in the order the lock was
// held, the holds (lock got → release started), the releases (release
// started → returned) and the hand-offs (release started → the next holder
// got the lock).
func phases(turns []turn) (waits, holds, releases, handoffs []time.Duration) {
	slices.SortFunc(turns, func(a, b turn) int { return cmp.Compare(a.got, b.got) })
	for i, t := range turns {
		if i > 0 && t.got < turns[i-1].relStart {
			// holders overlapped: the run's numbers would mean nothing
			panic(fmt.Sprintf("turn %d got the lock %v before the previous holder released it", i, time.Duration(turns[i-1].relStart-t.got)))
		}
		waits = append(waits, t.wait)
		holds = append(holds, time.Duration(t.relStart-t.got))
		releases = append(releases, time.Duration(t.relEnd-t.relStart))
		if i > 0 {
			handoffs = append(handoffs, time.Duration(t.got-turns[i-1].relStart))
		}
	}
	return waits, holds, releases, handoffs
}

// warm makes the measured hand-offs start with their connections open: a
// waiting acquisition through m, then (table mode) d takes a private lock,
// queues for it (Wait > 0) and releases it until d's LISTEN connection hears
// the release (a table release notifies when a driver is queued; advisory
// waiters wait in the server and need no LISTEN).
func warm(ctx context.Context, d postgres.Driver, m *component.Mutex) {
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
	var turns []turn
	if mode == floorMode {
		conn := must(pgx.Connect(ctx, *dsn))
		ready()
		turns = floorTurns(ctx, conn, *handoff)
		_ = conn.Close(ctx)
	} else {
		d := newDriver(postgres.Options{URL: *dsn, Mode: mode, Table: "mutexfx_bench_logged"})
		m := newMutex(d, 5*time.Second)
		warm(ctx, d, m)
		ready()
		turns = handoffWorkers(ctx, m, "handoff-8p-"+mode, 1, *handoff)
		_ = m.Close(ctx)
		_ = d.Close(ctx)
	}
	for _, t := range turns {
		fmt.Println(int64(t.wait), t.got, t.relStart, t.relEnd)
	}
}

// ready tells the parent the worker is ready and waits for the go signal,
// so that every process contends from the start.
func ready() {
	fmt.Println("ready")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
}

// floorMode is the hand-off run of the server's own queue: the floor the
// drivers' runs compare with.
const floorMode = "floor"

// floorTurns takes a lock each times as the server's own queue hands it
// over, on conn: a blocking pg_advisory_lock, held 1 ms, then
// pg_advisory_unlock (the server grants it to the next waiting session).
func floorTurns(ctx context.Context, conn *pgx.Conn, each int) []turn {
	const key = 0x666c6f6f72 // "floor"
	var turns []turn
	for range each {
		start := time.Now()
		must(conn.Exec(ctx, "SELECT pg_advisory_lock($1)", key))
		got := time.Now()
		time.Sleep(time.Millisecond)
		relStart := time.Now()
		must(conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", key))
		turns = append(turns, turn{got.Sub(start), got.UnixNano(), relStart.UnixNano(), time.Now().UnixNano()})
	}
	return turns
}

func handoffProcesses(mode string) []turn {
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
	var turns []turn
	for _, p := range procs {
		for p.out.Scan() {
			var v [4]int64
			for i, f := range strings.Fields(p.out.Text()) {
				v[i] = must(strconv.ParseInt(f, 10, 64))
			}
			turns = append(turns, turn{time.Duration(v[0]), v[1], v[2], v[3]})
		}
		must(0, p.cmd.Wait())
	}
	return turns
}
