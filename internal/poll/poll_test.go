package poll

import (
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestUntil(t *testing.T) {
	tests := []struct {
		name   string
		holdAt time.Duration // cond holds from then on; negative: never
		limit  time.Duration
		want   bool
		took   time.Duration
	}{
		{"at once", 0, time.Second, true, 0},
		{"later", 12 * time.Millisecond, time.Second, true, 15 * time.Millisecond},
		{"at the limit", time.Second, time.Second, true, time.Second},
		{"never", -1, time.Second, false, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				got := Until(tt.limit, Every, func() bool {
					return tt.holdAt >= 0 && time.Since(start) >= tt.holdAt
				})
				if got != tt.want || time.Since(start) != tt.took {
					t.Errorf("Until = %v after %v; want %v after %v", got, time.Since(start), tt.want, tt.took)
				}
			})
		})
	}
}
