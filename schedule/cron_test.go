package schedule_test

import (
	"slices"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/schedule"
)

// TestCronDaylightSaving: across the 2026 changes in New York (8 March,
// 02:00 EST → 03:00 EDT; 1 November, 02:00 EDT → 01:00 EST), a fixed-time
// job runs once a day as Vixie cron does: a skipped wall time at the change,
// a repeated one at its first occurrence. Wildcard jobs follow the clock.
// Instants in UTC: EST is UTC-5, EDT UTC-4.
func TestCronDaylightSaving(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skip("no time zone data:", err)
	}
	// Lord Howe Island goes from +10:30 to +11 at 02:00 on 4 October 2026.
	lordHowe, err := time.LoadLocation("Australia/Lord_Howe")
	if err != nil {
		t.Skip("no time zone data:", err)
	}
	z := func(month time.Month, day, hour, minute int) time.Time {
		return time.Date(2026, month, day, hour, minute, 0, 0, time.UTC)
	}
	tests := []struct {
		name     string
		cron     string
		loc      *time.Location
		from, to time.Time
		want     []time.Time
	}{
		{"spring: skipped 02:30 runs at the change", "30 2 * * *", ny, z(3, 7, 0, 0), z(3, 10, 0, 0),
			[]time.Time{z(3, 7, 7, 30), z(3, 8, 7, 0), z(3, 9, 6, 30)}},
		{"spring: skipped 02:00 and 02:30 run once", "0,30 2 * * *", ny, z(3, 8, 0, 0), z(3, 9, 0, 0),
			[]time.Time{z(3, 8, 7, 0)}},
		{"spring: 01:30 unchanged", "30 1 * * *", ny, z(3, 7, 0, 0), z(3, 10, 0, 0),
			[]time.Time{z(3, 7, 6, 30), z(3, 8, 6, 30), z(3, 9, 5, 30)}},
		{"spring: 03:30 unchanged", "30 3 * * *", ny, z(3, 8, 0, 0), z(3, 9, 0, 0),
			[]time.Time{z(3, 8, 7, 30)}},
		{"spring: CRON_TZ", "CRON_TZ=America/New_York 30 2 * * *", time.UTC, z(3, 8, 0, 0), z(3, 9, 0, 0),
			[]time.Time{z(3, 8, 7, 0)}},
		{"spring: wildcard follows the clock", "*/30 * * * *", ny, z(3, 8, 5, 59), z(3, 8, 7, 45),
			[]time.Time{z(3, 8, 6, 0), z(3, 8, 6, 30), z(3, 8, 7, 0), z(3, 8, 7, 30)}},
		{"fall: repeated 01:30 runs once", "30 1 * * *", ny, z(10, 31, 0, 0), z(11, 3, 0, 0),
			[]time.Time{z(10, 31, 5, 30), z(11, 1, 5, 30), z(11, 2, 6, 30)}},
		{"fall: repeated 01:00 and 01:30 run once each", "0,30 1 * * *", ny, z(11, 1, 0, 0), z(11, 2, 0, 0),
			[]time.Time{z(11, 1, 5, 0), z(11, 1, 5, 30)}},
		{"fall: first run in the second pass is the next day's", "30 1 * * *", ny, z(11, 1, 6, 10), z(11, 3, 0, 0),
			[]time.Time{z(11, 2, 6, 30)}},
		{"fall: 02:30 unchanged", "30 2 * * *", ny, z(11, 1, 0, 0), z(11, 2, 0, 0),
			[]time.Time{z(11, 1, 7, 30)}},
		{"fall: CRON_TZ", "CRON_TZ=America/New_York 30 1 * * *", time.UTC, z(11, 1, 0, 0), z(11, 2, 0, 0),
			[]time.Time{z(11, 1, 5, 30)}},
		{"fall: wildcard hour runs both passes", "0 * * * *", ny, z(11, 1, 4, 30), z(11, 1, 7, 30),
			[]time.Time{z(11, 1, 5, 0), z(11, 1, 6, 0), z(11, 1, 7, 0)}},
		{"fall: @hourly runs both passes", "@hourly", ny, z(11, 1, 4, 30), z(11, 1, 7, 30),
			[]time.Time{z(11, 1, 5, 0), z(11, 1, 6, 0), z(11, 1, 7, 0)}},
		{"half-hour change: skipped 02:15 runs at the change", "15 2 * * *", lordHowe, z(10, 3, 12, 0), z(10, 4, 12, 0),
			[]time.Time{z(10, 3, 15, 30)}},
		{"half-hour change: 02:45 unchanged", "45 2 * * *", lordHowe, z(10, 3, 12, 0), z(10, 4, 12, 0),
			[]time.Time{z(10, 3, 15, 45)}},
		{"fall: @daily unchanged", "@daily", ny, z(10, 31, 12, 0), z(11, 2, 12, 0),
			[]time.Time{z(11, 1, 4, 0), z(11, 2, 5, 0)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []time.Time
			for from := tt.from; ; {
				next, err := schedule.NextRun(schedule.Job{Cron: tt.cron}, from, tt.loc)
				if err != nil {
					t.Fatal(err)
				}
				if next.After(tt.to) {
					break
				}
				got = append(got, next.UTC())
				from = next
			}
			if !slices.EqualFunc(got, tt.want, time.Time.Equal) {
				t.Fatalf("instants\n%v\nwant\n%v", got, tt.want)
			}
		})
	}
}
