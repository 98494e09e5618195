package postgres

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mutexfx/mutexfx/drivers/drivertest"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestCloseCutsStalledCalls: Close cuts a call stuck on a stalled link
// (see drivertest.CloseCutsStalledCall), on the driver's own pool or on one
// given to NewWithPool. In table mode the call is a statement on the pool;
// in advisory mode a check on the lock's pinned session.
func TestCloseCutsStalledCalls(t *testing.T) {
	srv := testutil.StartPostgres(t)
	for _, mode := range []string{ModeAdvisory, ModeTable} {
		for _, c := range []struct{ withPool, dial bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
			withPool := c.withPool
			name := mode
			if withPool {
				name += "/NewWithPool"
			}
			if c.dial {
				name += "/FirstDial"
			}
			t.Run(name, func(t *testing.T) {
				p := testutil.NewProxy(t, fmt.Sprintf("127.0.0.1:%d", srv.Port))
				var d Driver
				var err error
				if withPool {
					pool, perr := pgxpool.New(ctxT(t), fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.Port()))
					if perr != nil {
						t.Fatal(perr)
					}
					// the application's pool, closed by the application
					// once the link heals (pgx waits for the connections
					// it cancelled)
					t.Cleanup(pool.Close)
					d, err = NewWithPool(pool, Options{Mode: mode, StallTimeout: time.Hour})
				} else {
					d, err = New(Options{Host: "127.0.0.1", Port: p.Port(), Username: "postgres", Database: "postgres",
						SSLMode: "disable", Mode: mode, StallTimeout: time.Hour})
				}
				if err != nil {
					t.Fatal(err)
				}
				drivertest.CloseCutsStalled(t, d, ErrClosed, p, c.dial)
			})
		}
	}
}
