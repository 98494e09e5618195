package mysql

import (
	"context"
	"errors"
	"fmt"

	"github.com/mutexfx/mutexfx/internal/lifectx"
)

// Calls in flight when Close is called are cut when Close's ctx ends or
// Close is done, whichever comes first, rather than waited for (a statement
// may be stuck on a stalled link): the owned pool's sockets are closed under them (and no new one is
// dialled), and with a pool given to NewWithDB each call's context ends
// (bind), which go-sql-driver honours by closing that connection.

// bind returns ctx, also cancelled (cause ErrClosed) when Close cuts calls
// in flight, and the function to call when done with it. With the driver's
// own pool it returns ctx as is: cutting closes the sockets instead, at no
// cost per call.
func (d *Driver) bind(ctx context.Context) (context.Context, func()) {
	if d.socks != nil {
		return ctx, func() {}
	}
	return lifectx.Bind(ctx, d.life, ErrClosed)
}

// cutCalls ends the calls in flight (see above).
func (d *Driver) cutCalls() {
	d.cut(ErrClosed)
	if d.socks != nil {
		d.socks.cutAll()
	}
}

// closedErr marks err, the failure of a call made or cut while Close runs
// or after it, as ErrClosed.
func (d *Driver) closedErr(err error) error {
	if err != nil && d.isClosed() && !errors.Is(err, ErrClosed) {
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return err
}
