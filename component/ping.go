package component

import (
	"context"

	"github.com/mutexfx/mutexfx/drivers"
)

// Ping checks that the store answers, for health checks: one round trip
// when the driver can make one (drivers.Pinger: Redis, PostgreSQL,
// MySQL). It reports false, and connects nothing, while the Mutex has not
// been used yet: stores connect at their first acquisition, and a health
// check must not make an idle store connect. In-process stores (memory,
// file) always answer. A failure is a *DriverError (ErrDriver) with Op
// "ping".
func (m *Mutex) Ping(ctx context.Context) (checked bool, err error) {
	m.mustBuilt()
	mustCtx(ctx)
	m.mu.Lock()
	started, closed := m.started, m.closed
	m.mu.Unlock()
	switch {
	case closed:
		return false, ErrClosed
	case !started:
		return false, nil
	}
	p, ok := m.drv.(drivers.Pinger)
	if !ok {
		return true, nil
	}
	if err := p.Ping(ctx); err != nil {
		return true, m.driverError("ping", "", err)
	}
	return true, nil
}
