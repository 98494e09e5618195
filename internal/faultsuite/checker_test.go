//go:build linux

package faultsuite

import (
	"testing"
	"time"
)

// acq, lost, rel, ended, kill, stop, cont and write build hand-made histories.
func acq(t int64, h, proc, lock string, fence uint64) Event {
	return Event{T: t, Kind: Acquired, Holder: h, Proc: proc, Lock: lock, Fence: fence}
}
func lost(t int64, h string) Event { return Event{T: t, Kind: Lost, Holder: h} }
func rel(t int64, h string) Event  { return Event{T: t, Kind: Releasing, Holder: h} }
func ended(t int64, proc, lock string, fence uint64) Event {
	return Event{T: t, Kind: Ended, Proc: proc, Lock: lock, Fence: fence}
}
func kill(t int64, p string) Event { return Event{T: t, Kind: Killed, Proc: p} }
func stop(t int64, p string) Event { return Event{T: t, Kind: Stopped, Proc: p} }
func cont(t int64, p string) Event { return Event{T: t, Kind: Continued, Proc: p} }
func write(t, seq int64, h, lock string, fence uint64, ok bool) Event {
	return Event{T: t, Kind: Write, Holder: h, Lock: lock, Fence: fence, Seq: seq, OK: ok}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name       string
		history    []Event
		overlaps   []time.Duration
		stale      int
		fences     int
		margins    []time.Duration
		recoveries []time.Duration
		resumeLags []time.Duration
		unnoticed  int
		violations int
	}{
		{
			name:    "clean handoff",
			history: []Event{acq(0, "a", "p1", "x", 1), write(5, 1, "a", "x", 1, true), rel(100, "a"), acq(110, "b", "p2", "x", 2), write(120, 2, "b", "x", 2, true), rel(200, "b")},
		},
		{
			name:       "overlap: the second holder is granted before the first is told",
			history:    []Event{acq(0, "a", "p1", "x", 1), acq(50, "b", "p2", "x", 2), lost(80, "a"), rel(200, "b")},
			overlaps:   []time.Duration{30},
			margins:    []time.Duration{-30},
			violations: 1,
		},
		{
			name:    "told lost before the next grant",
			history: []Event{acq(0, "a", "p1", "x", 1), lost(90, "a"), acq(100, "b", "p2", "x", 2), rel(150, "b")},
			margins: []time.Duration{10},
		},
		{
			name: "ended by its Mutex before the next grant, seen late by a starved holder",
			history: []Event{acq(0, "a", "p1", "x", 1), write(20, 1, "a", "x", 1, true), ended(40, "p1", "x", 1),
				acq(50, "b", "p2", "x", 2), lost(80, "a"), rel(200, "b")},
			margins: []time.Duration{10},
		},
		{
			name: "ended, but a write checked just before lands after the next grant",
			history: []Event{acq(0, "a", "p1", "x", 1), ended(40, "p1", "x", 1), acq(50, "b", "p2", "x", 2),
				write(60, 1, "a", "x", 1, true), lost(80, "a"), rel(200, "b")},
			overlaps:   []time.Duration{10},
			margins:    []time.Duration{-10},
			violations: 1,
		},
		{
			name: "another grant's end (other fence, other process) is not this one's",
			history: []Event{acq(0, "a", "p1", "x", 1), ended(40, "p1", "x", 9), ended(41, "p2", "x", 1),
				acq(50, "b", "p2", "x", 2), lost(80, "a"), rel(200, "b")},
			overlaps:   []time.Duration{30},
			margins:    []time.Duration{-30},
			violations: 1,
		},
		{
			name:       "paused past the loss: belief ends at SIGSTOP, the lag after SIGCONT is reported",
			history:    []Event{acq(0, "a", "p1", "x", 1), stop(10, "p1"), acq(50, "b", "p2", "x", 2), cont(100, "p1"), lost(101, "a"), rel(150, "b")},
			resumeLags: []time.Duration{1},
		},
		{
			name:       "SIGSTOP sent just before the grant's stamp: frozen right after acquiring, no overlap",
			history:    []Event{stop(10, "p1"), acq(11, "a", "p1", "x", 1), acq(1000, "b", "p2", "x", 2), cont(1500, "p1"), lost(1506, "a"), rel(1700, "b")},
			resumeLags: []time.Duration{6},
		},
		{
			name:    "paused briefly, still held: the pause is cut out",
			history: []Event{acq(0, "a", "p1", "x", 1), stop(10, "p1"), cont(20, "p1"), rel(30, "a"), acq(40, "b", "p2", "x", 2), rel(50, "b")},
		},
		{
			name:       "holder killed: recovery is kill to next grant",
			history:    []Event{acq(0, "a", "p1", "x", 1), kill(10, "p1"), acq(60, "b", "p2", "x", 2), rel(70, "b")},
			recoveries: []time.Duration{50},
		},
		{
			name: "repeated fence lets the old holder's write through",
			history: []Event{acq(0, "a", "p1", "x", 5), lost(40, "a"), acq(50, "b", "p2", "x", 5),
				write(55, 1, "b", "x", 5, true), write(60, 2, "a", "x", 5, true), rel(100, "b")},
			stale:      1,
			fences:     1,
			margins:    []time.Duration{10},
			violations: 2,
		},
		{
			name:       "fence below an earlier, ended grant's",
			history:    []Event{acq(0, "a", "p1", "x", 7), rel(10, "a"), acq(20, "b", "p2", "x", 3), rel(30, "b")},
			fences:     1,
			violations: 1,
		},
		{
			name: "refused stale write is no violation",
			history: []Event{acq(0, "a", "p1", "x", 1), lost(40, "a"), acq(50, "b", "p2", "x", 2),
				write(55, 1, "b", "x", 2, true), write(60, 2, "a", "x", 1, false), rel(100, "b")},
			margins: []time.Duration{10},
		},
		{
			name: "released without being told, after someone else got it",
			history: []Event{acq(0, "a", "p1", "x", 1), acq(50, "b", "p2", "x", 2), rel(80, "a"),
				{T: 81, Kind: Released, Holder: "a", OK: false}, rel(200, "b")},
			overlaps:   []time.Duration{30},
			unnoticed:  1,
			violations: 1,
		},
		{
			name:    "different locks never overlap",
			history: []Event{acq(0, "a", "p1", "x", 1), acq(10, "b", "p2", "y", 1), rel(50, "a"), rel(60, "b")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Check(tt.history)
			var od []time.Duration
			for _, o := range r.Overlaps {
				od = append(od, o.Duration)
			}
			same(t, "overlaps", od, tt.overlaps)
			same(t, "margins", r.Margins, tt.margins)
			same(t, "recoveries", r.Recoveries, tt.recoveries)
			same(t, "resume lags", r.ResumeLags, tt.resumeLags)
			if len(r.StaleWrites) != tt.stale {
				t.Errorf("stale writes = %+v, want %d", r.StaleWrites, tt.stale)
			}
			if r.Unnoticed != tt.unnoticed {
				t.Errorf("unnoticed = %d, want %d", r.Unnoticed, tt.unnoticed)
			}
			if len(r.Fences) != tt.fences {
				t.Errorf("fence faults = %+v, want %d", r.Fences, tt.fences)
			}
			if got := r.Violations(0); got != tt.violations {
				t.Errorf("Violations(0) = %d, want %d\n%s", got, tt.violations, r.Summary())
			}
		})
	}
}

func TestViolationsAllowance(t *testing.T) {
	r := Check([]Event{acq(0, "a", "p1", "x", 1), acq(50, "b", "p2", "x", 2), lost(80, "a"), rel(200, "b")})
	if got := r.Violations(30); got != 0 {
		t.Errorf("an overlap within the allowance counted: %d", got)
	}
	if got := r.Violations(29); got != 1 {
		t.Errorf("an overlap past the allowance not counted: %d", got)
	}
}

func same(t *testing.T, what string, got, want []time.Duration) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s = %v, want %v", what, got, want)
		return
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("%s = %v, want %v", what, got, want)
			return
		}
	}
}
