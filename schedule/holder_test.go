package schedule_test

import (
	"context"
	"os"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"

	"github.com/mutexfx/mutexfx/drivers/memory"
	"github.com/mutexfx/mutexfx/internal/testutil"
	"github.com/mutexfx/mutexfx/schedule"
)

// TestSkipNamesHolder: an instance skipping an instant names the holder
// (the same holder id as the runner's own log lines), at debug level; when
// the holder's run has outlived the period, at the next instant, at info
// level with the cause. Holdings released by their holder are not
// reported as interrupted.
func TestSkipNamesHolder(t *testing.T) {
	t.Parallel()
	const every = 400 * time.Millisecond
	drv := memory.New()
	logA, obsA := logs()
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	// A's clock is ahead: it takes the instants; its first run lasts until
	// released, over two periods.
	a, err := schedule.New(schedule.Options{Logger: logA, Mutex: newMutex(t, drv), Clock: schedule.OffsetClock(50 * time.Millisecond)},
		schedule.Job{Name: "long", Every: every, Exclusive: true, Run: func(ctx context.Context) error {
			select {
			case started <- struct{}{}:
				<-release
			default:
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	logB, obsB := logs()
	b, err := schedule.New(schedule.Options{Logger: logB, Mutex: newMutex(t, drv)},
		schedule.Job{Name: "long", Every: every, Exclusive: true, Run: func(context.Context) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*schedule.Scheduler{a, b} {
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	defer stop(t, b)
	defer stop(t, a)
	<-started
	const outlived = "exclusive job still run by another instance for an earlier instant, skipped"
	testutil.Poll(t, 10*time.Second, "B to find A's run outliving the period", func() bool { return obsB.FilterMessage(outlived).Len() > 0 })
	close(release)
	info := obsB.FilterMessage(outlived).All()[0]
	if info.Level != zapcore.InfoLevel || info.ContextMap()["cause"] != "the holder's run outlived the period" {
		t.Fatalf("%s %v, want info with the cause", info.Level, info.ContextMap())
	}
	holder, _ := info.ContextMap()["holder"].(string)
	if ctx := info.ContextMap(); ctx["holderPID"] != int64(os.Getpid()) || ctx["holderHost"] == nil || ctx["holderApp"] == nil {
		t.Fatalf("skip log %v, want the holder's app, host and pid %d", ctx, os.Getpid())
	}
	skipped := obsB.FilterMessage("exclusive job run by another instance, skipped").All()
	if len(skipped) == 0 || skipped[0].Level != zapcore.DebugLevel || skipped[0].ContextMap()["holder"] != holder || holder == "" {
		t.Fatalf("first skip %v, want debug naming holder %q", skipped, holder)
	}
	testutil.Poll(t, 10*time.Second, "A's run to end", func() bool { return obsA.FilterMessage("scheduled job done").Len() > 0 })
	if got := obsA.FilterMessage("scheduled job done").All()[0].ContextMap()["holder"]; got != holder {
		t.Fatalf("A logs holder %v, B %q", got, holder)
	}
	// B watched A's holdings, released by A: none was interrupted.
	testutil.Poll(t, 10*time.Second, "B to skip two more instants", func() bool {
		return obsB.FilterMessage("exclusive job run by another instance, skipped").Len() >= len(skipped)+2
	})
	if got := obsB.FilterMessage("exclusive job's instant interrupted on another instance").All(); len(got) != 0 {
		t.Fatalf("B reported released holdings as interrupted: %v", got[0].ContextMap())
	}
}
