package postgres

import (
	"context"
	"net"

	"github.com/jackc/pgx/v5/pgconn"
)

// The driver's life ends when Close's ctx ends or Close is done, whichever
// comes first. Close must not wait longer than its ctx for a
// statement stuck on a stalled link, nor for what pgx does when such a
// statement is cancelled: it closes the connection after sending the
// server a cancel request on a new connection, and waits up to 15 s for
// that one to answer. So the table driver's statements end with the life
// (bind), and the owned pool's connections, including pgx's cancel
// connections, are dialled so that they close with it (lifeDial).

// bind returns ctx, also cancelled (cause ErrClosed) when the driver's life
// ends; call stop when done with it.
func (b *base) bind(ctx context.Context) (context.Context, func()) { return b.life.Bind(ctx) }

// closedErr marks err, the failure of a call made or cut while Close runs
// or after it, as ErrClosed (closing the pool also cancels its dials).
func (b *base) closedErr(err error) error { return b.life.ClosedErr(err) }

// lifeDial wraps dial: connections fail to open once the driver's life has
// ended, and those open then are closed (Close cuts b.conns).
func (b *base) lifeDial(dial pgconn.DialFunc) pgconn.DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		ctx, stop := b.bind(ctx)
		defer stop()
		c, err := b.conns.Dial(ctx, dial, network, addr, nil)
		if err != nil {
			if cause := context.Cause(ctx); cause == ErrClosed {
				return nil, ErrClosed
			}
			return nil, err
		}
		return c, nil
	}
}
