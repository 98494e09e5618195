package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
)

var _ drivers.ServerClock = (*Driver)(nil)

// serverTimeSQL reads the server's wall clock now (clock_timestamp, not the
// transaction's start as now() would), the clock the locks' expiries use.
const serverTimeSQL = "SELECT clock_timestamp()"

// ServerTime returns the server's clock (microseconds), read on the
// connections the mode's other calls use: the main session in advisory
// mode, the pool in table mode. It connects at first use.
func (d *Driver) ServerTime(ctx context.Context) (t time.Time, err error) {
	if err := d.check(ctx); err != nil {
		return time.Time{}, err
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("postgres: server time: %w", permanent(d.closedErr(err)))
		}
	}()
	if d.opts.Mode == ModeAdvisory {
		s, err := d.mainSession(ctx)
		if err != nil {
			return time.Time{}, err
		}
		defer s.unlock()
		if err := s.conn.QueryRow(ctx, serverTimeSQL).Scan(&t); err != nil {
			d.settle(s)
			return time.Time{}, err
		}
		return t, nil
	}
	err = d.run(ctx, func(ctx context.Context, q querier) error {
		return q.QueryRow(ctx, serverTimeSQL).Scan(&t)
	})
	return t, err
}
