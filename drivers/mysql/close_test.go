package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/mutexfx/mutexfx/drivers/drivertest"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// proxyNet is a network name registered with go-sql-driver by the test.
const proxyNet = "mutexfx-test-tcp"

// closeCutsStalledCalls: Close cuts a call stuck on a stalled link (see
// drivertest.CloseCutsStalledCall), on the driver's own pool, on one given
// to NewWithDB, or on its own pool dialling through a network the
// application registered; with firstDial, the call is the driver's first,
// stuck opening a connection (TestFaults runs it on its server).
func closeCutsStalledCalls(t *testing.T, addr, mode string, withDB, registeredNet, firstDial bool) {
	p := testutil.NewProxy(t, addr)
	var d Driver
	var err error
	switch {
	case registeredNet:
		// a network the application registered with go-sql-driver: the
		// driver cannot know its sockets
		gomysql.RegisterDialContext(proxyNet, func(ctx context.Context, addr string) (net.Conn, error) {
			var dl net.Dialer
			return dl.DialContext(ctx, "tcp", addr)
		})
		d, err = New(Options{DSN: fmt.Sprintf("root@%s(127.0.0.1:%d)/test", proxyNet, p.Port()), Mode: mode})
	case withDB:
		// a pool that connects nothing until used (openDB pings)
		db, derr := sql.Open("mysql", fmt.Sprintf("root@tcp(127.0.0.1:%d)/test?interpolateParams=true", p.Port()))
		if derr != nil {
			t.Fatal(derr)
		}
		t.Cleanup(func() { db.Close() })
		d, err = NewWithDB(db, Options{Mode: mode})
	default:
		d, err = New(Options{Host: "127.0.0.1", Port: p.Port(), Database: "test", Mode: mode})
	}
	if err != nil {
		t.Fatal(err)
	}
	drivertest.CloseCutsStalled(t, d, ErrClosed, p, firstDial)
}
