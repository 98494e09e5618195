package main

import (
	"fmt"
	"strings"
	"time"
)

// printTable prints the results as a Markdown table, mutexfx first, with
// the goals checked for mutexfx.
func printTable(lat latency, in, procs []contention, rn renewalResult) {
	row := func(label string, goal string, cells ...string) {
		fmt.Printf("| %s | %s | %s |\n", label, strings.Join(cells, " | "), goal)
	}
	fmt.Printf("| | %s | goal (mutexfx) |\n", strings.Join(libs, " | "))
	fmt.Printf("|---|%s---|\n", strings.Repeat("---|", len(libs)))
	var cells []string
	for _, lib := range libs {
		cells = append(cells, fmt.Sprintf("%.2f× (%v)", ratio(lat.p50[lib], lat.ping), lat.p50[lib].Round(time.Microsecond)))
	}
	row(fmt.Sprintf("acquire+release p50, × PING p50 (%v)", lat.ping.Round(time.Microsecond)), check(ratio(lat.p50["mutexfx"], lat.ping) <= 2.2, "≤ 2.2"), cells...)
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
		var p99s, same, rate []string
		for _, c := range set.cs {
			if c.err != nil {
				p99s, same, rate = append(p99s, "failed"), append(same, "failed"), append(rate, "failed")
				continue
			}
			p99s = append(p99s, fmt.Sprintf("%v / %v", ms(c.waitP99), ms(c.waitMax)))
			same = append(same, fmt.Sprintf("%.0f%%", 100*c.sameAgain))
			rate = append(rate, fmt.Sprintf("%.0f", c.perSec))
		}
		m := set.cs[0]
		row(set.label+": wait p99 / max", check(m.err == nil && m.waitP99 <= set.p99 && m.waitMax <= set.max,
			fmt.Sprintf("≤ %v / ≤ %v", set.p99, set.max)), p99s...)
		row(set.label+": same worker again", check(m.sameAgain <= set.sameAgainLimit, "≤ 25%"), same...)
		row(set.label+": acquisitions/s", check(m.perSec >= best(set.cs), "≥ best peer"), rate...)
	}
	na := []string{"n/a", "n/a", "n/a"}
	row(fmt.Sprintf("%d locks held: renewal round trips per period", rn.locks), check(rn.roundTripsPerPeriod <= 10, "≤ 10"),
		append([]string{fmt.Sprintf("%.1f", rn.roundTripsPerPeriod)}, na...)...)
	row(fmt.Sprintf("%d locks held: CPU of the renewing process", rn.locks), "(reported)",
		append([]string{fmt.Sprintf("%.1f%% of a core", 100*rn.cpu)}, na...)...)
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

func check(ok bool, goal string) string {
	if ok {
		return goal + " ✓"
	}
	return goal + " ✗"
}
