//go:build linux

package faultsuite

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
)

// Explain lists what the history shows around an overlap: both holders'
// events and every fault from the first one's acquisition to the second
// one's last event, times relative to the first acquisition.
func Explain(h []Event, o Overlap) string {
	var mine []Event
	theirs := map[fenceKey]bool{} // their Ended events have no Holder
	for _, e := range h {
		if e.Holder == o.Earlier || e.Holder == o.Later {
			mine = append(mine, e)
			if e.Kind == Acquired {
				theirs[fenceKey{e.Proc, e.Lock, e.Fence}] = true
			}
		}
	}
	if len(mine) == 0 {
		return ""
	}
	sort.SliceStable(mine, func(i, j int) bool { return mine[i].T < mine[j].T })
	from, to := mine[0].T, mine[len(mine)-1].T
	var out []Event
	for _, e := range h {
		switch {
		case e.Holder == o.Earlier || e.Holder == o.Later:
			if e.Kind != Write {
				out = append(out, e)
			}
		case e.Kind == Ended && theirs[fenceKey{e.Proc, e.Lock, e.Fence}]:
			out = append(out, e)
		case e.Kind == Killed || e.Kind == Stopped || e.Kind == Continued || e.Kind == Fault:
			if e.T >= from-int64(time.Second) && e.T <= to {
				out = append(out, e)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].T < out[j].T })
	var b strings.Builder
	for _, e := range out {
		fmt.Fprintf(&b, "%+10.1fms %-10s %-5s %-14s %s fence=%d %s\n",
			float64(e.T-from)/1e6, e.Kind, e.Proc, e.Holder, e.Lock, e.Fence, e.Detail)
	}
	return b.String()
}

// WriteHistory writes a history as JSON lines to path.
func WriteHistory(path string, h []Event) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("faultsuite: history: %w", err)
	}
	enc := json.NewEncoder(f)
	for _, e := range h {
		if err := enc.Encode(e); err != nil {
			f.Close()
			return fmt.Errorf("faultsuite: history: %w", err)
		}
	}
	return f.Close()
}
