package drivers_test

import (
	"context"
	"errors"
	"testing"

	"github.com/mutexfx/mutexfx"
	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/etcd"
	"github.com/mutexfx/mutexfx/drivers/file"
	"github.com/mutexfx/mutexfx/drivers/mysql"
	"github.com/mutexfx/mutexfx/drivers/redis"
)

// TestOneVocabulary: every driver's ErrClosed and invalid-options sentinel
// is the one of package drivers, and so is the Mutex's ErrClosed.
func TestOneVocabulary(t *testing.T) {
	for _, tc := range []struct {
		name      string
		got, want error
	}{
		{"redis.ErrClosed", redis.ErrClosed, drivers.ErrClosed},
		{"etcd.ErrClosed", etcd.ErrClosed, drivers.ErrClosed},
		{"mysql.ErrClosed", mysql.ErrClosed, drivers.ErrClosed},
		{"file.ErrClosed", file.ErrClosed, drivers.ErrClosed},
		{"component.ErrClosed", component.ErrClosed, drivers.ErrClosed},
		{"mutexfx.ErrClosed", mutexfx.ErrClosed, drivers.ErrClosed},
		{"redis.ErrOptions", redis.ErrOptions, drivers.ErrOptions},
		{"etcd.ErrOptions", etcd.ErrOptions, drivers.ErrOptions},
		{"file.ErrInvalidOptions", file.ErrInvalidOptions, drivers.ErrOptions},
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
