package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mutexfx/mutexfx/drivers/postgres"
)

// The floors: the server's own queue, and a baton ring.
const (
	floorMode = "floor"
	ringMode  = "ring"
)

// childWorker is one hand-off process: it prints its turns, one a line.
func childWorker(ctx context.Context, mode string) {
	var turns []turn
	switch mode {
	case floorMode, ringMode:
		conn := must(pgx.Connect(ctx, *dsn))
		if mode == ringMode {
			must(conn.Exec(ctx, "LISTEN "+ringChannel(*ringIndex)))
		}
		ready()
		if mode == floorMode {
			turns = floorTurns(ctx, conn, *handoff)
		} else {
			turns = ringTurns(ctx, conn, *handoff)
		}
		_ = conn.Close(ctx)
	default:
		d, tr := childDriver(ctx, mode)
		m := newMutex(d, 5*time.Second)
		warm(ctx, d, m)
		name := "handoff-8p-" + mode
		ready()
		turns = handoffWorkers(ctx, m, name, 1, *handoff, tr)
		_ = m.Close(ctx)
		_ = d.Close(ctx)
	}
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	for _, t := range turns {
		var f []string
		for _, v := range t.fields() {
			f = append(f, strconv.FormatInt(*v, 10))
		}
		fmt.Fprintln(w, strings.Join(f, " "))
	}
}

// childDriver returns the driver of a hand-off process; with -phases, in
// table mode, on a pool whose statements tr traces.
func childDriver(ctx context.Context, mode string) (postgres.Driver, *tracer) {
	o := driverOptions(mode)
	if !*showPhases || o.Mode != postgres.ModeTable {
		return newDriver(o), nil
	}
	tr := &tracer{}
	cfg := must(pgxpool.ParseConfig(*dsn))
	cfg.ConnConfig.Tracer = tr
	cfg.MaxConns = postgres.DefaultMaxConns
	pool := must(pgxpool.NewWithConfig(ctx, cfg))
	o.URL = ""
	return must(postgres.NewWithPool(pool, o)), tr
}

// ready tells the parent the worker is ready and waits for the go signal,
// so that every process contends from the start.
func ready() {
	fmt.Println("ready")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
}

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
		turns = append(turns, turn{wait: got.Sub(start), got: got.UnixNano(), relStart: relStart.UnixNano(), relEnd: time.Now().UnixNano()})
	}
	return turns
}

func ringChannel(i int) string { return "mutexfx_bench_ring_" + strconv.Itoa(i) }

// ringTurns passes a baton around the 8 processes, on conn: a worker holds
// it 1 ms, then NOTIFYs the next one's channel with the statement a table
// release wakes its next waiter with (asynchronous commit). Worker 0 starts
// with the baton; a turn's wait runs from the end of the worker's previous
// pass (or the start) to the baton's arrival.
func ringTurns(ctx context.Context, conn *pgx.Conn, each int) []turn {
	var turns []turn
	start := time.Now()
	for i := range each {
		if i > 0 || *ringIndex > 0 {
			must(conn.WaitForNotification(ctx))
		}
		got := time.Now()
		time.Sleep(time.Millisecond)
		relStart := time.Now()
		must(conn.Exec(ctx, "SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, 'baton')", ringChannel((*ringIndex+1)%8)))
		relEnd := time.Now()
		turns = append(turns, turn{wait: got.Sub(start), got: got.UnixNano(), relStart: relStart.UnixNano(), relEnd: relEnd.UnixNano()})
		start = relEnd
	}
	return turns
}
