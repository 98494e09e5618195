package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	mredis "github.com/mutexfx/mutexfx/drivers/redis"
)

// scriptCost is the server's time in one kind of command (a mutexfx script
// by name, or a command) during a mutexfx process contention run, per
// acquisition.
type scriptCost struct {
	name          string
	inner         bool // a command called by the scripts (counted in their time too)
	callsPerAcq   float64
	usecPerCall   float64
	usecPerAcq    float64
	totalPerAcq   bool // the row of all commands together
	acquisitions  int
	slowlogLosses bool // SLOWLOG was full: the figures undercount
}

// slowlogLen bounds the entries SLOWLOG keeps during the scripts run: far
// more than 8 workers make in a run of a few seconds.
const slowlogLen = 1 << 20

// scriptCosts runs one more mutexfx process contention run with SLOWLOG
// logging every command (slowlog-log-slower-than 0), and sums the server's
// time per command, mutexfx's scripts told apart by their digests. SLOWLOG
// times a command's execution alone (as INFO commandstats' usec does), not
// the reading and writing of its connection. Logging every command costs
// the server time of its own, so this run is not one of those whose CPU
// the table shows. The server's settings are restored afterwards.
func scriptCosts() ([]scriptCost, error) {
	ctx := context.Background()
	c := goredis.NewClient(&goredis.Options{Addr: *addr})
	defer c.Close()
	old, err := c.ConfigGet(ctx, "slowlog-*").Result()
	if err != nil {
		return nil, err
	}
	defer func() {
		for k, v := range old {
			_ = c.ConfigSet(ctx, k, v).Err()
		}
		_ = c.Do(ctx, "SLOWLOG", "RESET").Err()
	}()
	for k, v := range map[string]string{"slowlog-max-len": fmt.Sprint(slowlogLen), "slowlog-log-slower-than": "0"} {
		if err := c.ConfigSet(ctx, k, v).Err(); err != nil {
			return nil, err
		}
	}
	if err := c.Do(ctx, "SLOWLOG", "RESET").Err(); err != nil {
		return nil, err
	}
	run, err := contendProcesses("mutexfx")
	if err != nil {
		return nil, err
	}
	logs, err := c.SlowLogGet(ctx, -1).Result()
	if err != nil {
		return nil, err
	}
	names := map[string]string{}
	for name, sha := range mredis.ScriptDigests() {
		names[sha] = name
	}
	type sum struct {
		calls int
		usec  time.Duration
	}
	sums := map[string]*sum{}
	var total sum
	for _, l := range logs {
		if len(l.Args) == 0 {
			continue
		}
		cmd := strings.ToUpper(l.Args[0])
		inner := l.ClientAddr == "?:0"
		// The run's own commands only: its scripts (on its lock's keys),
		// and the other commands logged in its seconds (SLOWLOG has whole
		// seconds), but not those of this client and of the samplers.
		script := (cmd == "EVALSHA" || cmd == "EVAL") && len(l.Args) > 3
		if script && !strings.Contains(l.Args[3], run.name) ||
			!script && !inner && (l.Time.Before(run.start.Truncate(time.Second)) || l.Time.After(run.end) ||
				cmd == "INFO" || cmd == "SLOWLOG" || cmd == "CONFIG") {
			continue
		}
		name := cmd
		if inner {
			name = "in scripts: " + cmd
		}
		if script {
			if n, ok := names[strings.ToLower(l.Args[1])]; ok {
				name = "script " + n
			}
		}
		s := sums[name]
		if s == nil {
			s = &sum{}
			sums[name] = s
		}
		s.calls++
		s.usec += l.Duration
		if !inner {
			total.calls++
			total.usec += l.Duration
		}
	}
	acq := float64(max(run.acquisitions, 1))
	var out []scriptCost
	row := func(name string, s sum, all bool) scriptCost {
		us := float64(s.usec) / float64(time.Microsecond)
		return scriptCost{name: name, inner: strings.HasPrefix(name, "in scripts: "), callsPerAcq: float64(s.calls) / acq, usecPerCall: us / float64(max(s.calls, 1)),
			usecPerAcq: us / acq, totalPerAcq: all, acquisitions: run.acquisitions, slowlogLosses: len(logs) >= slowlogLen}
	}
	for name, s := range sums {
		out = append(out, row(name, *s, false))
	}
	out = append(out, row("all commands (not counting those in scripts twice)", total, true))
	slices.SortFunc(out, func(a, b scriptCost) int {
		if a.inner != b.inner {
			return cmp.Compare(btoi(a.inner), btoi(b.inner))
		}
		if a.totalPerAcq != b.totalPerAcq {
			return cmp.Compare(btoi(a.totalPerAcq), btoi(b.totalPerAcq))
		}
		return cmp.Compare(b.usecPerAcq, a.usecPerAcq)
	})
	return out, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// printScriptCosts prints the table of scriptCosts.
func printScriptCosts(cs []scriptCost) {
	if len(cs) == 0 {
		return
	}
	fmt.Printf("\nmutexfx, %d processes: Redis commands per acquisition and the server's time in them (SLOWLOG, one more run "+
		"of %d acquisitions; the calls are exact, the times are wall time in the server, which the worker processes "+
		"preempting it on a busy machine inflate: go test -bench Scripts ./drivers/redis times the scripts alone)\n\n",
		*workers, cs[0].acquisitions)
	fmt.Println("| command | calls per acquisition | µs per call | µs per acquisition |")
	fmt.Println("|---|---|---|---|")
	for _, c := range cs {
		name := c.name
		if c.totalPerAcq {
			name = "**" + name + "**"
		}
		fmt.Printf("| %s | %.2f | %.1f | %.1f |\n", name, c.callsPerAcq, c.usecPerCall, c.usecPerAcq)
	}
	if cs[0].slowlogLosses {
		fmt.Println("\n(SLOWLOG was full: the figures undercount)")
	}
}
