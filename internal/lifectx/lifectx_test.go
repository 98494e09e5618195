package lifectx

import (
	"context"
	"errors"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errGone = errors.New("gone")

func TestBind(t *testing.T) {
	t.Run("life ends", func(t *testing.T) {
		life, end := context.WithCancel(context.Background())
		ctx, stop := Bind(context.Background(), life, errGone)
		defer stop()
		if ctx.Err() != nil {
			t.Fatal("bound context ended before its life")
		}
		end()
		<-ctx.Done()
		if !errors.Is(context.Cause(ctx), errGone) {
			t.Fatalf("cause %v; want %v", context.Cause(ctx), errGone)
		}
	})
	t.Run("life already ended", func(t *testing.T) {
		life, end := context.WithCancel(context.Background())
		end()
		ctx, stop := Bind(context.Background(), life, errGone)
		defer stop()
		if !errors.Is(context.Cause(ctx), errGone) { // at once, not later
			t.Fatalf("cause %v; want %v at once", context.Cause(ctx), errGone)
		}
	})
	t.Run("call ends first", func(t *testing.T) {
		life, end := context.WithCancel(context.Background())
		defer end()
		parent, cancel := context.WithCancel(context.Background())
		ctx, stop := Bind(parent, life, errGone)
		cancel()
		<-ctx.Done()
		if !errors.Is(ctx.Err(), context.Canceled) || errors.Is(context.Cause(ctx), errGone) {
			t.Fatalf("err %v, cause %v; want the parent's", ctx.Err(), context.Cause(ctx))
		}
		stop()
		end() // after stop, life's end touches nothing
	})
}
