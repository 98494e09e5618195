package mutexfx_test

import (
	"bytes"
	"strings"
	"testing"

	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"
	"go.uber.org/zap"

	"github.com/mutexfx/mutexfx"
)

// TestModuleBadConfigOnlyError: an invalid configuration is the first and
// only error of fx.New, even in an application whose fx logger needs its
// *zap.Logger: fx builds that logger (and so prints no "missing type:
// *zap.Logger" of its own) and logs the configuration error through it.
func TestModuleBadConfigOnlyError(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"mutex:\n  orders: {ttl: 5}\n", "mutex.orders.ttl: must be at least 10ms"},
		{"mutex:\n  orders: {tll: 1s}\n", `mutex.orders.tll: unknown key: did you mean "ttl"?`},
		{"mutex:\n  orders: {driver: {type: carrier-pigeon}}\n", `mutex.orders.driver.type: mutexfx: driver not found: unknown driver type "carrier-pigeon"`},
		{"mutex:\n  orders: {driver: {type: file}}\n", "mutex.orders.driver.dir: required"},
	} {
		var log bytes.Buffer
		app := fx.New(
			fx.Provide(zap.NewNop),
			fx.WithLogger(func(*zap.Logger) fxevent.Logger { return &fxevent.ConsoleLogger{W: &log} }),
			mutexfx.Module(yamlConfig(t, tc.yaml)),
			fx.Invoke(func(*mutexfx.Mutex) {}),
		)
		err := app.Err()
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "zap.Logger") || strings.Contains(err.Error(), "; ") {
			t.Errorf("%q: fx.New error %v; want only %q…", tc.yaml, err, tc.want)
		}
		if out := log.String(); !strings.Contains(out, "Initialized custom logger") || !strings.Contains(out, tc.want) {
			t.Errorf("%q: the application's fx logger was not built, or did not log the error:\n%s", tc.yaml, out)
		}
	}
}
