package schedule_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/mutexfx/mutexfx"
	"github.com/mutexfx/mutexfx/schedule"
)

// TestFxLogsThroughGraphLogger: schedule.Module logs through the graph's
// *zap.Logger: a failing job's line reaches it, naming the job.
func TestFxLogsThroughGraphLogger(t *testing.T) {
	log, obs := logs()
	ran := make(chan struct{})
	once := sync.OnceFunc(func() { close(ran) })
	app := fxtest.New(t, fx.NopLogger, mutexfx.Module(fxConfig(t)), schedule.Module,
		fx.Supply(log),
		schedule.Provide(schedule.Job{Name: "fx-failing", Every: 10 * time.Millisecond, Run: func(context.Context) error {
			once()
			return errors.New("boom")
		}}))
	app.RequireStart()
	<-ran
	app.RequireStop() // waits for the run, which logs as it returns
	failed := obs.FilterMessage("scheduled job failed").All()
	if len(failed) == 0 || failed[0].ContextMap()["job"] != "fx-failing" || failed[0].ContextMap()["error"] != "boom" {
		t.Fatalf("failure lines %+v, want the job's, through the graph's logger", failed)
	}
}
