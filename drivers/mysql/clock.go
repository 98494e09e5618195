package mysql

import (
	"context"
	"fmt"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
)

var _ drivers.ServerClock = (*Driver)(nil)

// serverTimeSQL reads the server's clock as microseconds since the Unix
// epoch, in UTC arithmetic throughout: neither the session's time_zone nor
// the DSN's parseTime and loc can shift it.
const serverTimeSQL = "SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))"

// ServerTime returns the server's clock (UTC_TIMESTAMP(6), microseconds),
// the clock the table mode's expiries use. It connects at first use.
func (d *Driver) ServerTime(ctx context.Context) (t time.Time, err error) {
	if d.isClosed() {
		return time.Time{}, ErrClosed
	}
	ctx, stop := d.bind(ctx)
	defer stop()
	var us int64
	if err := d.db.QueryRowContext(ctx, serverTimeSQL).Scan(&us); err != nil {
		return time.Time{}, fmt.Errorf("mysql: server time: %w", permanent(d.closedErr(err)))
	}
	return time.UnixMicro(us), nil
}
