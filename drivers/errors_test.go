package drivers_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/mutexfx/mutexfx"
	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/config"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/etcd"
	"github.com/mutexfx/mutexfx/drivers/file"
	"github.com/mutexfx/mutexfx/drivers/mysql"
	"github.com/mutexfx/mutexfx/drivers/postgres"
	"github.com/mutexfx/mutexfx/drivers/redis"
)

// TestOneVocabulary: every driver's ErrClosed and invalid-options sentinel
// is the one of package drivers, and so is the Mutex's ErrClosed; the
// drivers that queue waiters use the fair-queue timing of package drivers,
// with the values they had (100 ms, 400 ms).
func TestOneVocabulary(t *testing.T) {
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"drivers.WaitPollInterval", drivers.WaitPollInterval, 100 * time.Millisecond},
		{"drivers.WaiterLiveness", drivers.WaiterLiveness, 400 * time.Millisecond},
		{"redis.WaitPollInterval", redis.WaitPollInterval, drivers.WaitPollInterval},
		{"redis.WaiterLiveness", redis.WaiterLiveness, drivers.WaiterLiveness},
		{"postgres.WaitPollInterval", postgres.WaitPollInterval, drivers.WaitPollInterval},
		{"postgres.WaiterLiveness", postgres.WaiterLiveness, drivers.WaiterLiveness},
		{"redis.ErrClosed", redis.ErrClosed, drivers.ErrClosed},
		{"etcd.ErrClosed", etcd.ErrClosed, drivers.ErrClosed},
		{"mysql.ErrClosed", mysql.ErrClosed, drivers.ErrClosed},
		{"file.ErrClosed", file.ErrClosed, drivers.ErrClosed},
		{"postgres.ErrClosed", postgres.ErrClosed, drivers.ErrClosed},
		{"component.ErrClosed", component.ErrClosed, drivers.ErrClosed},
		{"mutexfx.ErrClosed", mutexfx.ErrClosed, drivers.ErrClosed},
		{"redis.ErrOptions", redis.ErrOptions, drivers.ErrOptions},
		{"etcd.ErrOptions", etcd.ErrOptions, drivers.ErrOptions},
		{"postgres.ErrOptions", postgres.ErrOptions, drivers.ErrOptions},
		{"file.ErrOptions", file.ErrOptions, drivers.ErrOptions},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %v; want %v", tc.name, tc.got, tc.want)
		}
	}
}

// TestClosedStoreIsErrClosed: a Mutex whose store was closed under it
// fails with an error matching mutexfx.ErrClosed (and ErrDriver: the store
// failed), as a closed Mutex does.
func TestClosedStoreIsErrClosed(t *testing.T) {
	d, err := file.New(file.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	m, err := component.New(component.Options{Driver: d, Name: "closed"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	if err := d.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	l, err := m.TryAcquire(t.Context(), "a")
	if l != nil || !errors.Is(err, mutexfx.ErrClosed) || !errors.Is(err, mutexfx.ErrDriver) {
		t.Fatalf("TryAcquire on a closed store = %v, %v; want an error matching ErrClosed and ErrDriver", l, err)
	}
}

// TestOptionsError: the message names the key; the error matches
// ErrOptions and wraps its cause.
func TestOptionsError(t *testing.T) {
	cause := errors.New("must be positive")
	for _, tc := range []struct {
		err  *drivers.OptionsError
		want string
	}{
		{&drivers.OptionsError{Key: "mutex.orders.driver.poolSize", Err: cause}, "mutex.orders.driver.poolSize: must be positive"},
		{&drivers.OptionsError{Err: cause}, "must be positive"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q; want %q", got, tc.want)
		}
		if !errors.Is(tc.err, drivers.ErrOptions) || !errors.Is(tc.err, cause) {
			t.Errorf("%v matches ErrOptions %t, its cause %t; want both", tc.err, errors.Is(tc.err, drivers.ErrOptions), errors.Is(tc.err, cause))
		}
	}
}

// TestFactoryOptionsErrors: every networked driver's factory reports an
// invalid option, an unknown key and a client of another type as a
// *config.Error at the full key path that matches drivers.ErrOptions.
func TestFactoryOptionsErrors(t *testing.T) {
	const path = "mutex.orders.driver"
	for _, tc := range []struct {
		name    string
		factory drivers.Factory
		options map[string]any
		client  any
		want    string
	}{
		{"redis invalid", redis.Factory(), map[string]any{"addrs": []any{"a:1"}, "restartWait": "-1s"}, nil, path + ".restartWait: must not be negative"},
		{"redis unknown key", redis.Factory(), map[string]any{"addrs": []any{"a:1"}, "adrs": "x"}, nil, path + ".adrs: unknown key"},
		{"redis client", redis.Factory(), map[string]any{}, "x", path + ".client: is a string, not a redis.UniversalClient"},
		{"etcd invalid", etcd.Factory(), map[string]any{}, nil, path + ".endpoints: is required"},
		{"etcd unknown key", etcd.Factory(), map[string]any{"endpoints": []any{"a:1"}, "prefix": "x"}, nil, path + ".prefix: unknown key"},
		{"etcd client", etcd.Factory(), map[string]any{}, "x", path + ".client: is a string, not a *clientv3.Client"},
		{"mysql invalid", mysql.Factory(), map[string]any{"mode": "x"}, nil, path + ".mode: must be"},
		{"mysql renamed key", mysql.Factory(), map[string]any{"dial_timeout": "1s"}, nil, path + ".dial_timeout: unknown key: did you mean"},
		{"mysql unknown key", mysql.Factory(), map[string]any{"nope": 1}, nil, path + ".nope: unknown key"},
		{"mysql client", mysql.Factory(), map[string]any{}, "x", path + ".client: is a string, not a *sql.DB"},
		{"postgres invalid", postgres.Factory(), map[string]any{"mode": "x"}, nil, path + ".mode: "},
		{"postgres unknown key", postgres.Factory(), map[string]any{"nope": 1}, nil, path + ".nope: unknown key"},
		{"postgres client", postgres.Factory(), map[string]any{}, "x", path + ".client: is a string, not a *pgxpool.Pool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := tc.factory.New(drivers.Spec{Path: path, Options: tc.options, Client: tc.client, Logger: zap.NewNop()})
			if err == nil {
				_ = d.Close(t.Context())
				t.Fatalf("no error; want %q", tc.want)
			}
			var ce *config.Error
			if !strings.HasPrefix(err.Error(), tc.want) || !errors.Is(err, drivers.ErrOptions) || !errors.As(err, &ce) {
				t.Errorf("error %q (ErrOptions %t, *config.Error %t); want %q..., both", err, errors.Is(err, drivers.ErrOptions), ce != nil, tc.want)
			}
		})
	}
}

// TestNewOptionsErrors: the drivers' New report an invalid option as an
// error matching drivers.ErrOptions that names the key.
func TestNewOptionsErrors(t *testing.T) {
	_, rerr := redis.New(redis.Options{Addrs: []string{"a:1"}, RestartWait: -1})
	_, eerr := etcd.New(etcd.Options{}, nil)
	_, merr := mysql.New(mysql.Options{Mode: "x"})
	_, perr := postgres.New(postgres.Options{Mode: "x"})
	_, ferr := file.New(file.Options{Dir: t.TempDir(), BusyTimeout: -1})
	for _, tc := range []struct {
		name string
		err  error
		key  string
	}{{"redis", rerr, "restartWait"}, {"etcd", eerr, "endpoints"}, {"mysql", merr, "mode"}, {"postgres", perr, "mode"}, {"file", ferr, "busyTimeout"}} {
		if !errors.Is(tc.err, drivers.ErrOptions) || !strings.Contains(fmt.Sprint(tc.err), tc.key) {
			t.Errorf("%s.New: %v; want an error matching ErrOptions naming %s", tc.name, tc.err, tc.key)
		}
	}
}
