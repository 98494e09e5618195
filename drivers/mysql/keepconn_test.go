package mysql

import (
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestAdvisoryKeptConnection: advisory mode keeps a released lock's
// connection for the next acquisition; one killed while kept is replaced
// by a connection from the pool, and the acquisition succeeds, whatever
// the fence source.
func TestAdvisoryKeptConnection(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"sequence", Options{DSN: testutil.MySQLDSN()}},
		{"counter", Options{DSN: testutil.MySQLDSN(), Fence: FenceCounter, FenceTable: "mutexfx_test_fence_counter"}},
		{"uuid_short", Options{DSN: testutil.MySQLDSN(), Fence: FenceUUIDShort}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t)
			d := openDriver(t, tc.opts)
			admin := openDB(t, testutil.MySQLDSN())
			key := "mysqltest:" + runID + ":kept:" + tc.name
			acquire := func() (connID int64) {
				t.Helper()
				tok := token()
				res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute})
				if err != nil || !res.Acquired {
					t.Fatalf("Acquire = %+v, %v", res, err)
				}
				connID = adv(d).get(key, tok).connID
				if ok, err := d.Release(ctx, key, tok); err != nil || !ok {
					t.Fatalf("Release = %v, %v", ok, err)
				}
				return connID
			}
			first := acquire()
			if again := acquire(); again != first {
				t.Fatalf("second acquisition on connection %d, want the kept %d", again, first)
			}
			// The server closes the killed session's socket; the kept
			// connection then fails its next statement.
			killSession(ctx, t, admin, first)
			if third := acquire(); third == first {
				t.Fatalf("acquired on the killed connection %d", first)
			}
		})
	}
}
