package kit_test

import (
	"errors"
	"fmt"
	"testing"

	"go.uber.org/goleak"

	"github.com/mutexfx/mutexfx/config"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/kit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestSpecError: each form of an invalid option lands at its full key path
// as a *config.Error matching drivers.ErrOptions; another error is
// prefixed with the block's path and keeps its chain.
func TestSpecError(t *testing.T) {
	const path = "mutex.a.driver"
	store := errors.New("connection refused")
	for _, tc := range []struct {
		name    string
		err     error
		want    string
		options bool
	}{
		{"OptionErrorf", drivers.OptionErrorf("poolSize", "must not be %s", "negative"), path + ".poolSize: must not be negative", true},
		{"OptionErrorf without key", drivers.OptionErrorf("", "set url or addrs, not both"), path + ": set url or addrs, not both", true},
		{"wrapped OptionsError", fmt.Errorf("redis: %w", drivers.OptionErrorf("db", "must not be negative")), path + ".db: must not be negative", true},
		{"OptionsError", &drivers.OptionsError{Key: "ttl", Err: errors.New("too short")}, path + ".ttl: too short", true},
		{"relative config.Error", config.Errorf("mode", "unknown"), path + ".mode: unknown", true},
		{"config.Error of the block", config.Errorf("", "no pool"), path + ": no pool", true},
		{"store error", store, path + ": connection refused", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := kit.SpecError(path, tc.err)
			if err.Error() != tc.want {
				t.Errorf("SpecError = %q; want %q", err, tc.want)
			}
			var ce *config.Error
			if got := errors.Is(err, drivers.ErrOptions) && errors.As(err, &ce); got != tc.options {
				t.Errorf("matches ErrOptions and *config.Error: %t; want %t", got, tc.options)
			}
			if !tc.options && !errors.Is(err, store) {
				t.Errorf("%v does not wrap the store's error", err)
			}
		})
	}
}
