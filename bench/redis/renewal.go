package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mutexfx/mutexfx/component"
	mredis "github.com/mutexfx/mutexfx/drivers/redis"
)

// renewalResult is the renewal of *nlocks locks held by one component.
type renewalResult struct {
	roundTripsPerPeriod float64
	cpu                 float64 // share of one core used by the renewing process
	err                 error   // the measurement failed
}

// renewalWindow is how many ttls the renewal measurement lasts (three
// renewal periods each): long enough that a period more or less in the
// window barely moves the figure, short enough for the default 3 s ttl.
const renewalWindow = 5

// renewal runs the measurement in a process of its own (this binary with
// -renewer), so that its CPU time is the renewing component's alone.
func renewal() (renewalResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return renewalResult{}, err
	}
	var out bytes.Buffer
	cmd := exec.Command(exe, "-renewer", *addr, strconv.Itoa(*nlocks), ttl.String())
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return renewalResult{}, err
	}
	var r renewalResult
	if _, err := fmt.Sscan(strings.TrimSpace(out.String()), &r.roundTripsPerPeriod, &r.cpu); err != nil {
		return r, fmt.Errorf("renewer said %q: %w", out.String(), err)
	}
	return r, nil
}

// counter counts round trips: commands and pipelines.
type counter struct{ n atomic.Int64 }

func (c *counter) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (c *counter) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error { c.n.Add(1); return next(ctx, cmd) }
}
func (c *counter) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error { c.n.Add(1); return next(ctx, cmds) }
}

// renewerMain: addr locks ttl. Acquires the locks with one component, then
// counts round trips and CPU time over renewalWindow ttls, the round trips
// scaled to one renewal period (ttl/3) by the measured wall time. Prints
// "roundTripsPerPeriod cpuShare"; fails when, at the end, fewer locks are
// held than were acquired.
func renewerMain(args []string) int {
	if len(args) != 3 {
		fmt.Fprintln(os.Stderr, "renewer: bad arguments")
		return 2
	}
	count, _ := strconv.Atoi(args[1])
	lockTTL, _ := time.ParseDuration(args[2])
	c := goredis.NewClient(&goredis.Options{Addr: args[0], ContextTimeoutEnabled: true})
	defer c.Close()
	rt := &counter{}
	c.AddHook(rt)
	d, err := mredis.NewWithClient(c, mredis.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "renewer:", err)
		return 1
	}
	m, err := component.New(component.Options{Driver: d, Prefix: fmt.Sprintf("bench:renew:%d:", time.Now().UnixNano()), TTL: lockTTL})
	if err != nil {
		fmt.Fprintln(os.Stderr, "renewer:", err)
		return 1
	}
	defer d.Close(context.Background())
	defer m.Close(context.Background())
	ctx := context.Background()
	var wg sync.WaitGroup
	var failed atomic.Int64
	for g := range 16 {
		wg.Go(func() {
			for i := g; i < count; i += 16 {
				if _, err := m.TryAcquire(ctx, strconv.Itoa(i)); err != nil {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() > 0 {
		fmt.Fprintf(os.Stderr, "renewer: %d locks not acquired\n", failed.Load())
		return 1
	}
	time.Sleep(lockTTL / 3) // let the renewals of the acquisition burst settle into ticks
	before, cpu0, t0 := rt.n.Load(), cpuTime(), time.Now()
	time.Sleep(renewalWindow * lockTTL)
	trips, cpu, wall := rt.n.Load()-before, cpuTime()-cpu0, time.Since(t0)
	if held := len(m.Held()); held < count {
		fmt.Fprintf(os.Stderr, "renewer: %d of %d locks still held at the end\n", held, count)
		return 1
	}
	periods := wall.Seconds() / (lockTTL / 3).Seconds()
	fmt.Printf("%.2f %.4f\n", float64(trips)/periods, cpu.Seconds()/wall.Seconds())
	return 0
}
