package mysql

import (
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestIdleHolderKeepsLock: a healthy holder whose lock's connection runs
// no statement of its own (probes and renewals use the pool) keeps the lock
// past its session's wait_timeout, whether the DSN sets it (as docs/mysql.md
// suggests, to bound a partitioned holder's locks) or the pool given to
// NewWithDB has it (the server's default is 8 hours; 2 s here). Before, the
// server closed the idle connection at wait_timeout, and a waiter blocked
// in GET_LOCK got the lock before its holder was told.
func TestIdleHolderKeepsLock(t *testing.T) {
	dsn := testutil.MySQLDSN() + "?wait_timeout=2"
	for _, c := range []struct {
		name string
		open func(t *testing.T) Driver
	}{
		{"DSN", func(t *testing.T) Driver { return openDriver(t, Options{DSN: dsn}) }},
		{"NewWithDB", func(t *testing.T) Driver { return givenDriver(t, openDB(t, dsn), Options{}) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := ctxT(t)
			admin := openDB(t, testutil.MySQLDSN())
			d1 := c.open(t)
			lost := lostEvents(ctx, t, d1, 1)
			m1 := mutexOn(t, d1, 30*time.Second)
			m2 := newMutex(t, Options{DSN: testutil.MySQLDSN()}, 30*time.Second)

			l1, err := m1.Acquire(ctx, "job")
			if err != nil {
				t.Fatal(err)
			}
			h := adv(d1).get(l1.Key(), l1.Token())
			if h == nil || h.idle != 2*time.Second {
				t.Fatalf("held lock %+v; want its session's wait_timeout, 2s", h)
			}
			// Blocked in GET_LOCK for 2.5 × wait_timeout: it gets the lock
			// the moment the holder's connection ends.
			l2, err := m2.Acquire(ctx, "job", component.WithTimeout(5*time.Second))
			if err == nil {
				l2.Release(ctx)
				t.Fatalf("a waiter got the lock of a healthy holder (fence %d after %d); holder's Err: %v", l2.Fence(), l1.Fence(), l1.Err())
			}
			if !errors.Is(err, component.ErrTimeout) {
				t.Fatalf("second Acquire: %v; want ErrTimeout", err)
			}
			var holder sql.NullInt64
			if err := admin.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", lockName(l1.Key())).Scan(&holder); err != nil {
				t.Fatal(err)
			}
			if l1.Err() != nil || holder.Int64 != h.connID {
				t.Fatalf("holder's Err %v, server's holder %v; want held by connection %d", l1.Err(), holder, h.connID)
			}
			select {
			case ev := <-lost:
				t.Fatalf("Lost event %+v", ev)
			default:
			}
			if ok, err := l1.Release(ctx); err != nil || !ok {
				t.Fatalf("Release = %v, %v", ok, err)
			}
		})
	}
}
