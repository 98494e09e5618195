package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mutexfx/mutexfx/bench/internal/stats"
)

// wakeMessages is how many messages the wake measurement sends.
const wakeMessages = 500

// wakeIdle is how long the wake measurement's subscriber sleeps between
// messages: as long as a worker waits in a fair queue of -workers, each
// holding the lock -hold, before its turn (workers − 1 holds). How long a
// process slept changes what waking it costs on a virtual machine: here
// about 110–150 µs after 1 ms, 270–300 µs after 8 ms.
func wakeIdle() time.Duration { return time.Duration(max(*workers-1, 1)) * *hold }

// wakeFloor measures the least a fair hand-off to another process can cost
// here: a Pub/Sub message, published every wakeIdle, to a subscriber in
// another process (this binary with -wakee) that sleeps in between, as a
// waiting worker does. It returns the p50 of publish start → message read
// by the subscriber. A peer whose releasing worker takes the lock again
// (two round trips in a process that is already running) pays no such
// wake-up.
func wakeFloor() (time.Duration, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	channel := fmt.Sprintf("bench:wake:%d", time.Now().UnixNano())
	cmd := exec.Command(exe, "-wakee", *addr, channel)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer func() { _ = cmd.Wait() }()
	sc := bufio.NewScanner(out)
	if !sc.Scan() || sc.Text() != "ready" {
		_ = cmd.Process.Kill()
		return 0, fmt.Errorf("wakee did not start: %q", sc.Text())
	}
	ctx := context.Background()
	c := goredis.NewClient(&goredis.Options{Addr: *addr})
	defer c.Close()
	for range wakeMessages {
		time.Sleep(wakeIdle())
		if err := c.Publish(ctx, channel, strconv.FormatInt(time.Now().UnixNano(), 10)).Err(); err != nil {
			_ = cmd.Process.Kill()
			return 0, err
		}
	}
	if !sc.Scan() {
		return 0, fmt.Errorf("wakee: no result: %v", sc.Err())
	}
	ns, err := strconv.ParseInt(sc.Text(), 10, 64)
	return time.Duration(ns), err
}

// wakeeMain is the subscriber of wakeFloor: args addr, channel. It prints
// "ready", then, after wakeMessages messages, the p50 delay in ns.
func wakeeMain(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "wakee: want addr channel")
		return 2
	}
	ctx := context.Background()
	c := goredis.NewClient(&goredis.Options{Addr: args[0]})
	defer c.Close()
	ps := c.Subscribe(ctx, args[1])
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "wakee:", err)
		return 1
	}
	fmt.Println("ready")
	delays := make([]time.Duration, 0, wakeMessages)
	for len(delays) < wakeMessages {
		m, err := ps.ReceiveMessage(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, "wakee:", err)
			return 1
		}
		now := time.Now().UnixNano()
		sent, err := strconv.ParseInt(m.Payload, 10, 64)
		if err != nil {
			fmt.Fprintln(os.Stderr, "wakee:", err)
			return 1
		}
		delays = append(delays, time.Duration(now-sent))
	}
	fmt.Println(int64(stats.Percentile(delays, 50)))
	return 0
}
