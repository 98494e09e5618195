package mysql

import (
	"testing"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/mutexfx/mutexfx/drivers/drivertest"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestServerTime: UTC_TIMESTAMP(6) reads the server's clock whatever the
// session's time zone.
func TestServerTime(t *testing.T) {
	for _, tz := range []string{"SYSTEM", "'+09:30'", "'-11:00'"} {
		t.Run(tz, func(t *testing.T) {
			cfg, err := gomysql.ParseDSN(testutil.MySQLDSN())
			if err != nil {
				t.Fatal(err)
			}
			cfg.Params = map[string]string{"time_zone": tz}
			d := openDriver(t, Options{DSN: cfg.FormatDSN()})
			var got string
			if err := coreOf(d).db.QueryRowContext(t.Context(), "SELECT @@session.time_zone").Scan(&got); err != nil || "'"+got+"'" != tz && got != tz {
				t.Fatalf("session time_zone = %q, %v; want %s", got, err, tz)
			}
			drivertest.ServerTimeNear(t, d)
		})
	}
}
