package main

import (
	"fmt"
	"os"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/mutexfx/mutexfx/bench/internal/stats"
)

// printTable prints one run's (or the medians') figures, a row per library,
// with mutexfx's ratios to concurrency.
func printTable(lat latency, cs []contention) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "library\tacq+rel p50\tin Gets\tacq+rel p99\twait p99 (%d procs)\tsame-again\tacq/s\t\n", *workers)
	for i, lib := range libs {
		fmt.Fprintf(tw, "%s\t%v\t%.2f\t%v\t%v\t%.1f%%\t%.0f\t\n", lib,
			lat.p50[lib].Round(time.Microsecond), float64(lat.p50[lib])/float64(lat.rtt),
			lat.p99[lib].Round(time.Microsecond), cs[i].waitP99.Round(time.Microsecond), 100*cs[i].sameAgain, cs[i].perSec)
	}
	_ = tw.Flush()
	fmt.Printf("Get p50 %v; mutexfx/concurrency: acquire+release p50 %.2f×, contended wait p99 %.2f×\n\n",
		lat.rtt.Round(time.Microsecond), float64(lat.p50["mutexfx"])/float64(lat.p50["concurrency"]),
		float64(cs[0].waitP99)/float64(cs[1].waitP99))
}

func medianLatency(ls []latency) latency {
	med := latency{p50: map[string]time.Duration{}, p99: map[string]time.Duration{}}
	var rtts []time.Duration
	for _, l := range ls {
		rtts = append(rtts, l.rtt)
	}
	med.rtt = stats.Median(rtts)
	for _, lib := range libs {
		var p50s, p99s []time.Duration
		for _, l := range ls {
			p50s, p99s = append(p50s, l.p50[lib]), append(p99s, l.p99[lib])
		}
		med.p50[lib], med.p99[lib] = stats.Median(p50s), stats.Median(p99s)
	}
	return med
}

func medianContention(runs [][]contention) []contention {
	out := make([]contention, len(libs))
	for i := range libs {
		var waits []time.Duration
		var same, rate []float64
		for _, r := range runs {
			waits, same, rate = append(waits, r[i].waitP99), append(same, r[i].sameAgain), append(rate, r[i].perSec)
		}
		out[i] = contention{waitP99: stats.Median(waits), sameAgain: medianFloat(same), perSec: medianFloat(rate)}
	}
	return out
}

func medianFloat(xs []float64) float64 {
	slices.Sort(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}
