package lifecycle_test

import (
	"context"
	"errors"
	"testing"
	"time"

	fxt "go.uber.org/fx/fxtest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mutexfx/mutexfx/lifecycle"
)

// stuck closes only when its ctx ends, and reports it.
type stuck struct{}

func (stuck) Close(ctx context.Context) error {
	<-ctx.Done()
	return context.Cause(ctx)
}

// healthy closes at once, recording that it was closed while the stuck
// store was still closing.
type healthy struct{ closed chan struct{} }

func (h healthy) Close(context.Context) error {
	close(h.closed)
	return nil
}

// TestGroupClosesConcurrently: one hook closes every store at once — the
// healthy store closes while the stuck one is still in its Close — and
// returns at the deadline with the stuck store's error, named in a
// warning.
func TestGroupClosesConcurrently(t *testing.T) {
	lc := fxt.NewLifecycle(t)
	core, logs := observer.New(zap.WarnLevel)
	g := lifecycle.NewGroup(lc, zap.New(core))
	// "a" sorts first: were the stores closed in turn, "b" would wait
	h := healthy{make(chan struct{})}
	g.Add("a", stuck{})
	g.Add("b", h)
	lc.RequireStart()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- lc.Stop(ctx) }()
	<-h.closed // before the stuck store's ctx ends
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop: %v", err)
	}
	if n := logs.FilterMessageSnippet("did not close").FilterField(zap.String("store", "a")).Len(); n != 1 || logs.Len() != 1 {
		t.Fatalf("want one warning naming store a; got %v", logs.All())
	}
}

// TestCloseAllJoinsErrors: every store's error, prefixed with its name.
func TestCloseAllJoinsErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	err := lifecycle.CloseAll(ctx, nil, map[string]lifecycle.Closer{"x": stuck{}, "y": healthy{make(chan struct{})}})
	if err == nil || err.Error() != `store "x": context deadline exceeded` {
		t.Fatalf("CloseAll: %v", err)
	}
}
