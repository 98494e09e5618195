package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// printTable prints the results as a Markdown table, mutexfx first, with
// the goals checked for mutexfx.
func printTable(lat latency, in, procs []contention, rn renewalResult) {
	row := func(label string, goal string, cells ...string) {
		fmt.Printf("| %s | %s | %s |\n", label, strings.Join(cells, " | "), goal)
	}
	// only is a row with a value for mutexfx (the first library) and fill
	// for the others.
	only := func(v, fill string) []string {
		return append([]string{v}, slices.Repeat([]string{fill}, len(libs)-1)...)
	}
	fmt.Printf("| | %s | goal (mutexfx) |\n", strings.Join(libs, " | "))
	fmt.Printf("|---|%s---|\n", strings.Repeat("---|", len(libs)))
	var cells []string
	for _, lib := range libs {
		cells = append(cells, fmt.Sprintf("%.2f× (%v)", ratio(lat.p50[lib], lat.ping), lat.p50[lib].Round(time.Microsecond)))
	}
	row(fmt.Sprintf("acquire+release p50, × PING p50 (%v)", lat.ping.Round(time.Microsecond)), check(ratio(lat.p50["mutexfx"], lat.ping) <= 2.2, "≤ 2.2"), cells...)
	row("the same, mutexfx driver alone (component's share)", "(reported)",
		only(fmt.Sprintf("%.2f× (%v)", ratio(lat.driver, lat.ping), lat.driver.Round(time.Microsecond)), "n/a")...)
	fl := fmt.Sprintf("%.2f× (%v)", ratio(lat.floor, lat.ping), lat.floor.Round(time.Microsecond))
	row("floor: bare SET NX PX + DEL, same client as PING (no token check, no fence)", "(reported)", only(fl, "—")...)
	row("floor: two PINGs in a row (the round trips alone of a two-command lock)", "(reported)",
		only(fmt.Sprintf("%.2f× (%v)", ratio(lat.twoPing, lat.ping), lat.twoPing.Round(time.Microsecond)), "—")...)
	cells = cells[:0]
	for _, lib := range libs {
		cells = append(cells, fmt.Sprintf("%.2f× (%v)", ratio(lat.p10[lib], lat.p10["ping"]), lat.p10[lib].Round(time.Microsecond)))
	}
	row(fmt.Sprintf("acquire+release p10, × PING p10 (%v; two PINGs %.2f×, floor %.2f×, mutexfx driver alone %.2f×): the fast mode of bimodal round trips",
		lat.p10["ping"].Round(time.Microsecond), ratio(lat.p10["2ping"], lat.p10["ping"]), ratio(lat.p10["floor"], lat.p10["ping"]),
		ratio(lat.p10["driver"], lat.p10["ping"])), "(reported)", cells...)
	best := func(cs []contention) float64 {
		b := 0.0
		for _, c := range cs[1:] {
			b = max(b, c.perSec)
		}
		return b
	}
	for _, set := range []struct {
		label          string
		cs             []contention
		p99, max       time.Duration
		sameAgainLimit float64
	}{
		{"8 goroutines, one process", in, 15 * time.Millisecond, 30 * time.Millisecond, 0.25},
		{"8 processes", procs, 40 * time.Millisecond, 100 * time.Millisecond, 0.25},
	} {
		var p99s, same, rate, gap []string
		for _, c := range set.cs {
			if c.err != nil {
				p99s, same, rate, gap = append(p99s, "failed"), append(same, "failed"), append(rate, "failed"), append(gap, "failed")
				continue
			}
			p99s = append(p99s, fmt.Sprintf("%v / %v", ms(c.waitP99), ms(c.waitMax)))
			same = append(same, fmt.Sprintf("%.0f%%", 100*c.sameAgain))
			rate = append(rate, fmt.Sprintf("%.0f", c.perSec))
			gap = append(gap, fmt.Sprintf("%.0f µs", float64(c.handOff)/float64(time.Microsecond)))
		}
		m := set.cs[0]
		row(set.label+": wait p99 / max", check(m.err == nil && m.waitP99 <= set.p99 && m.waitMax <= set.max,
			fmt.Sprintf("≤ %v / ≤ %v", set.p99, set.max)), p99s...)
		row(set.label+": same worker again", check(m.err == nil && m.sameAgain <= set.sameAgainLimit, "≤ 25%"), same...)
		row(set.label+": acquisitions/s", check(m.err == nil && m.perSec >= best(set.cs), "≥ best peer"), rate...)
		row(set.label+": hand-off p50 (release starts → next holder has it)", "(reported)", gap...)
	}
	var cpus []string
	for _, c := range procs {
		if c.err != nil {
			cpus = append(cpus, "failed")
			continue
		}
		cpus = append(cpus, cpuPerAcq(c))
	}
	row("8 processes: CPU per acquisition, worker processes + Redis server", "(reported)", cpus...)
	row(fmt.Sprintf("floor of a fair hand-off across processes: Pub/Sub message to a process asleep %v between messages (a waiter's turn in a fair queue), p50", wakeIdle()),
		"(reported)", only(fmt.Sprintf("%.0f µs", float64(lat.wake)/float64(time.Microsecond)), "—")...)
	row(fmt.Sprintf("floor of a fair hand-off across processes: a baton passed round %d processes by Pub/Sub, each holding it %v, no lock state: acquisitions/s (hand-off p50; CPU per acquisition, workers + server)", *workers, *hold),
		"(reported)", only(fmt.Sprintf("%.0f (%.0f µs; %s)", lat.ring.perSec, float64(lat.ring.handOff)/float64(time.Microsecond), cpuPerAcq(lat.ring)), "—")...)
	trips, cpu := fmt.Sprintf("%.1f", rn.roundTripsPerPeriod), fmt.Sprintf("%.1f%% of a core", 100*rn.cpu)
	if rn.err != nil {
		trips, cpu = "failed", "failed"
	}
	row(fmt.Sprintf("%d locks held: renewal round trips per period", *nlocks), check(rn.err == nil && rn.roundTripsPerPeriod <= 10, "≤ 10"),
		only(trips, "n/a")...)
	row(fmt.Sprintf("%d locks held: CPU of the renewing process", *nlocks), "(reported)", only(cpu, "n/a")...)
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// cpuPerAcq shows a run's CPU per acquisition, of its workers + of the server.
func cpuPerAcq(c contention) string {
	return fmt.Sprintf("%.0f + %.0f µs", float64(c.workerCPU)/float64(time.Microsecond), float64(c.serverCPU)/float64(time.Microsecond))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

func check(ok bool, goal string) string {
	if ok {
		return goal + " ✓"
	}
	return goal + " ✗"
}

// printRun prints one run's main numbers, so that the spread behind the
// medians shows.
func printRun(r int, lat latency, in, procs []contention) {
	fmt.Printf("run %d: PING %v;", r+1, lat.ping.Round(time.Microsecond))
	for i, lib := range libs {
		fmt.Printf(" %s %.2f×", lib, ratio(lat.p50[lib], lat.ping))
		for _, c := range []contention{in[i], procs[i]} {
			if c.err != nil {
				fmt.Print(" failed")
				continue
			}
			fmt.Printf(" %.0f/s p99 %s same %.0f%% hand-off %.0fµs release %.0fµs", c.perSec, ms(c.waitP99), 100*c.sameAgain,
				float64(c.handOff)/float64(time.Microsecond), float64(c.release)/float64(time.Microsecond))
		}
		if procs[i].err == nil {
			fmt.Printf(" cpu %s", cpuPerAcq(procs[i]))
		}
		fmt.Print(";")
	}
	fmt.Printf(" mutexfx driver alone %.2f×; floor %.2f×; two PINGs %.2f×; wake-up %.0fµs; ring %.0f/s hand-off %.0fµs release %.0fµs cpu %s\n", ratio(lat.driver, lat.ping),
		ratio(lat.floor, lat.ping), ratio(lat.twoPing, lat.ping), float64(lat.wake)/float64(time.Microsecond),
		lat.ring.perSec, float64(lat.ring.handOff)/float64(time.Microsecond), float64(lat.ring.release)/float64(time.Microsecond), cpuPerAcq(lat.ring))
}

// medianLatency is, per library, the median ratio over the runs,
// expressed against the median PING.
func medianLatency(ls []latency) latency {
	ping := median(ls, func(l latency) float64 { return float64(l.ping) })
	out := latency{ping: time.Duration(ping), p50: map[string]time.Duration{}}
	for _, lib := range libs {
		r := median(ls, func(l latency) float64 { return ratio(l.p50[lib], l.ping) })
		out.p50[lib] = time.Duration(r * ping)
	}
	out.driver = time.Duration(ping * median(ls, func(l latency) float64 { return ratio(l.driver, l.ping) }))
	out.floor = time.Duration(ping * median(ls, func(l latency) float64 { return ratio(l.floor, l.ping) }))
	out.twoPing = time.Duration(ping * median(ls, func(l latency) float64 { return ratio(l.twoPing, l.ping) }))
	out.wake = time.Duration(median(ls, func(l latency) float64 { return float64(l.wake) }))
	out.ring = contention{
		perSec:    median(ls, func(l latency) float64 { return l.ring.perSec }),
		handOff:   time.Duration(median(ls, func(l latency) float64 { return float64(l.ring.handOff) })),
		workerCPU: time.Duration(median(ls, func(l latency) float64 { return float64(l.ring.workerCPU) })),
		serverCPU: time.Duration(median(ls, func(l latency) float64 { return float64(l.ring.serverCPU) })),
	}
	ping10 := median(ls, func(l latency) float64 { return float64(l.p10["ping"]) })
	out.p10 = map[string]time.Duration{"ping": time.Duration(ping10)}
	for name := range ls[0].p10 {
		if name != "ping" {
			out.p10[name] = time.Duration(ping10 * median(ls, func(l latency) float64 { return ratio(l.p10[name], l.p10["ping"]) }))
		}
	}
	return out
}

// medianContention is, per library, the median of each figure over the
// runs that did not fail (failed when all did).
func medianContention(runs [][]contention) []contention {
	out := make([]contention, len(libs))
	for i := range libs {
		var ok []contention
		for _, run := range runs {
			if run[i].err == nil {
				ok = append(ok, run[i])
			} else {
				out[i].err = run[i].err
			}
		}
		if len(ok) == 0 {
			continue
		}
		out[i] = contention{
			waitP99:   time.Duration(median(ok, func(c contention) float64 { return float64(c.waitP99) })),
			waitMax:   time.Duration(median(ok, func(c contention) float64 { return float64(c.waitMax) })),
			sameAgain: median(ok, func(c contention) float64 { return c.sameAgain }),
			handOff:   time.Duration(median(ok, func(c contention) float64 { return float64(c.handOff) })),
			perSec:    median(ok, func(c contention) float64 { return c.perSec }),
			workerCPU: time.Duration(median(ok, func(c contention) float64 { return float64(c.workerCPU) })),
			serverCPU: time.Duration(median(ok, func(c contention) float64 { return float64(c.serverCPU) })),
		}
	}
	return out
}

func median[T any](xs []T, f func(T) float64) float64 {
	vs := make([]float64, len(xs))
	for i, x := range xs {
		vs[i] = f(x)
	}
	slices.Sort(vs)
	if len(vs)%2 == 1 {
		return vs[len(vs)/2]
	}
	return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
}
