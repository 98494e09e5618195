package mutexfx_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/fx"
	fxt "go.uber.org/fx/fxtest"

	"github.com/mutexfx/mutexfx"
)

// TestModuleApplicationFromConfig: a store's application and traceAll keys
// reach its Mutex through fx: the holder identity names the configured
// application (another store, without the key, the binary), and every
// acquisition makes a span, without a caller's span.
func TestModuleApplicationFromConfig(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	var s struct {
		fx.In
		Orders *mutexfx.Mutex `name:"orders"`
		Jobs   *mutexfx.Mutex `name:"jobs"`
	}
	app := fxt.New(t,
		mutexfx.Module(yamlConfig(t, "mutex:\n  orders: {application: orders-api.v2, traceAll: true}\n  jobs: {}\n")),
		fx.Provide(func() trace.TracerProvider { return tp }),
		fx.Populate(&s),
		fx.NopLogger,
	)
	app.RequireStart()
	defer app.RequireStop()
	ctx := context.Background()
	for _, tc := range []struct {
		m       *mutexfx.Mutex
		app     string
		spanned bool
	}{
		{s.Orders, "orders-api.v2", true},
		{s.Jobs, filepath.Base(os.Args[0]), false},
	} {
		before := len(spans.Ended())
		l, err := tc.m.Acquire(ctx, "job")
		if err != nil {
			t.Fatal(err)
		}
		st, held, err := tc.m.Inspect(ctx, "job")
		if err != nil || !held {
			t.Fatalf("%s: inspect: held %v, err %v", tc.m.Name(), held, err)
		}
		if st.Holder.Application != tc.app {
			t.Errorf("%s: holder application %q, want %q", tc.m.Name(), st.Holder.Application, tc.app)
		}
		if _, err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if got := len(spans.Ended()) > before; got != tc.spanned {
			t.Errorf("%s: spans made without a caller's span: %v, want %v", tc.m.Name(), got, tc.spanned)
		}
	}
}
