package schedule_test

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/mysql"
	"github.com/mutexfx/mutexfx/drivers/postgres"
	"github.com/mutexfx/mutexfx/drivers/redis"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestSkewWarningRealStores: through the Redis, PostgreSQL and MySQL
// drivers (drivers.ServerClock), an instance whose clock is 400 ms ahead
// of the store's logs the skew warning at its first instant; one on the
// store's clock (the stores run on this host) logs none.
func TestSkewWarningRealStores(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		store string
		open  func() (drivers.Driver, error)
	}{
		{"redis", func() (drivers.Driver, error) { return redis.New(redis.Options{Addrs: []string{testutil.RedisAddr()}}) }},
		{"postgres", func() (drivers.Driver, error) {
			return postgres.New(postgres.Options{URL: testutil.PostgresDSN(), Mode: postgres.ModeTable})
		}},
		{"mysql", func() (drivers.Driver, error) {
			return mysql.New(mysql.Options{DSN: testutil.MySQLDSN(), Mode: mysql.ModeTable})
		}},
	} {
		for _, offset := range []time.Duration{400 * time.Millisecond, 0} {
			t.Run(tc.store+"/"+offset.String(), func(t *testing.T) {
				t.Parallel()
				drv, err := tc.open()
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = drv.Close(context.Background()) })
				if _, ok := drv.(drivers.ServerClock); !ok {
					t.Fatalf("%T does not implement drivers.ServerClock", drv)
				}
				m, err := component.New(component.Options{Driver: drv, TTL: 2 * time.Second, Prefix: "skew-" + rand.Text()[:10] + ":"})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = m.Close(context.Background()) })
				wantSkewWarning(t, skewWarnings(t, m, offset), offset, offset != 0)
			})
		}
	}
}
