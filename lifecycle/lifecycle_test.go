package lifecycle_test

import (
	"context"
	"errors"
	"testing"
	"time"

	fxt "go.uber.org/fx/fxtest"
	"go.uber.org/goleak"

	"github.com/mutexfx/mutexfx/lifecycle"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type closer struct {
	closed   int
	deadline bool
	err      error
}

func (c *closer) Close(ctx context.Context) error {
	c.closed++
	_, c.deadline = ctx.Deadline()
	return c.err
}

func TestRegisterClosesOnStopOnly(t *testing.T) {
	lc := fxt.NewLifecycle(t)
	c := &closer{}
	lifecycle.Register(lc, c)
	ctx := context.Background()
	if err := lc.Start(ctx); err != nil || c.closed != 0 {
		t.Fatalf("start: %v, closed %d times: nothing happens on start", err, c.closed)
	}
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := lc.Stop(sctx); err != nil || c.closed != 1 || !c.deadline {
		t.Fatalf("stop: %v, closed %d times, deadline passed %v", err, c.closed, c.deadline)
	}
}

func TestRegisterReportsCloseErrors(t *testing.T) {
	lc := fxt.NewLifecycle(t)
	boom := errors.New("boom")
	lifecycle.Register(lc, &closer{err: boom})
	lc.RequireStart()
	if err := lc.Stop(context.Background()); !errors.Is(err, boom) {
		t.Fatalf("stop: %v", err)
	}
}
