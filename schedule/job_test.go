package schedule_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/schedule"
)

func TestNewRejectsInvalidJobs(t *testing.T) {
	run := func(context.Context) error { return nil }
	tests := []struct {
		name string
		jobs []schedule.Job
	}{
		{"no name", []schedule.Job{{Every: time.Second, Run: run}}},
		{"no run", []schedule.Job{{Name: "a", Every: time.Second}}},
		{"neither every nor cron", []schedule.Job{{Name: "a", Run: run}}},
		{"both every and cron", []schedule.Job{{Name: "a", Every: time.Second, Cron: "* * * * *", Run: run}}},
		{"every too short", []schedule.Job{{Name: "a", Every: time.Microsecond, Run: run}}},
		{"negative every", []schedule.Job{{Name: "a", Every: -time.Second, Run: run}}},
		{"bad cron", []schedule.Job{{Name: "a", Cron: "61 * * * *", Run: run}}},
		{"six fields", []schedule.Job{{Name: "a", Cron: "0 0 3 * * *", Run: run}}},
		{"@every", []schedule.Job{{Name: "a", Cron: "@every 5m", Run: run}}},
		{"@every with a zone", []schedule.Job{{Name: "a", Cron: "CRON_TZ=UTC @every 5m", Run: run}}},
		{"ttl too short", []schedule.Job{{Name: "a", Every: time.Second, TTL: time.Millisecond, Run: run}}},
		{"negative ttl", []schedule.Job{{Name: "a", Every: time.Second, TTL: -time.Second, Run: run}}},
		{"ttl too long", []schedule.Job{{Name: "a", Every: time.Second, TTL: component.MaxTTL + 1, Run: run}}},
		{"duplicate", []schedule.Job{{Name: "a", Every: time.Second, Run: run}, {Name: "a", Cron: "@daily", Run: run}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := schedule.New(schedule.Options{}, tt.jobs...); !errors.Is(err, schedule.ErrInvalidJob) {
				t.Fatalf("err = %v, want ErrInvalidJob", err)
			}
		})
	}
	ok := []schedule.Job{
		{Name: "every", Every: 5 * time.Minute, Run: run},
		{Name: "cron", Cron: "0 3 * * *", Run: run},
		{Name: "tz", Cron: "CRON_TZ=Europe/Paris 0 3 * * *", Run: run},
		{Name: "daily", Cron: "@daily", Run: run},
		{Name: "ttl", Every: time.Minute, Exclusive: true, TTL: 10 * time.Millisecond, Run: run},
	}
	if _, err := schedule.New(schedule.Options{}, ok...); err != nil {
		t.Fatal(err)
	}
}

// TestCronThatNeverFires: an expression without any instant (30 February,
// 31 April) is refused by New and NextRun, with an error naming the job;
// 29 February (every four years) is accepted.
func TestCronThatNeverFires(t *testing.T) {
	run := func(context.Context) error { return nil }
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, spec := range []string{"0 0 30 2 *", "0 0 31 4 *", "0 0 31 2,4,6,9,11 *", "CRON_TZ=Europe/Paris 0 0 30 2 *"} {
		t.Run(spec, func(t *testing.T) {
			_, err := schedule.New(schedule.Options{}, schedule.Job{Name: "never", Cron: spec, Run: run})
			if !errors.Is(err, schedule.ErrInvalidJob) || !strings.Contains(err.Error(), `job "never"`) || !strings.Contains(err.Error(), "never fires") {
				t.Fatalf("New: err = %v, want ErrInvalidJob naming the job", err)
			}
			if _, err := schedule.NextRun(schedule.Job{Cron: spec}, now, time.UTC); !errors.Is(err, schedule.ErrInvalidJob) {
				t.Fatalf("NextRun: err = %v, want ErrInvalidJob", err)
			}
		})
	}
	if _, err := schedule.New(schedule.Options{}, schedule.Job{Name: "leap", Cron: "0 0 29 2 *", Run: run}); err != nil {
		t.Fatal(err)
	}
	got, err := schedule.NextRun(schedule.Job{Cron: "0 0 29 2 *"}, now, time.UTC)
	if want := time.Date(2028, 2, 29, 0, 0, 0, 0, time.UTC); err != nil || !got.Equal(want) {
		t.Fatalf("leap day: %v, %v; want %v", got, err, want)
	}
}

func TestPlannedInstants(t *testing.T) {
	utc := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	tests := []struct {
		name string
		job  schedule.Job
		now  time.Time
		want time.Time
	}{
		{"every 5m aligned", schedule.Job{Every: 5 * time.Minute}, utc, time.Date(2024, 5, 6, 7, 10, 0, 0, time.UTC)},
		{"every 5m on an instant", schedule.Job{Every: 5 * time.Minute}, time.Date(2024, 5, 6, 7, 10, 0, 0, time.UTC), time.Date(2024, 5, 6, 7, 15, 0, 0, time.UTC)},
		{"every 7s since the epoch", schedule.Job{Every: 7 * time.Second}, time.Unix(700, 1), time.Unix(707, 0)},
		{"cron 3am", schedule.Job{Cron: "0 3 * * *"}, utc, time.Date(2024, 5, 7, 3, 0, 0, 0, time.UTC)},
		{"cron tz", schedule.Job{Cron: "CRON_TZ=Asia/Tokyo 0 3 * * *"}, utc, time.Date(2024, 5, 6, 18, 0, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := schedule.NextRun(tt.job, tt.now, time.UTC)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(tt.want) {
				t.Fatalf("next = %v, want %v", got, tt.want)
			}
		})
	}
}
