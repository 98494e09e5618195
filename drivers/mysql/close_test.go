package mysql

import (
	"fmt"
	"testing"

	"github.com/mutexfx/mutexfx/drivers/drivertest"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// closeCutsStalledCalls: Close cuts a call stuck on a stalled link (see
// drivertest.CloseCutsStalledCall), on the driver's own pool or on one
// given to NewWithDB (TestFaults runs it on its server).
func closeCutsStalledCalls(t *testing.T, addr, mode string, withDB bool) {
	p := testutil.NewProxy(t, addr)
	var d *Driver
	var err error
	if withDB {
		d, err = NewWithDB(openDB(t, fmt.Sprintf("root@tcp(127.0.0.1:%d)/test?interpolateParams=true", p.Port())), Options{Mode: mode})
	} else {
		d, err = New(Options{Host: "127.0.0.1", Port: p.Port(), Database: "test", Mode: mode})
	}
	if err != nil {
		t.Fatal(err)
	}
	drivertest.CloseCutsStalledCall(t, d, ErrClosed, p.Stall, p.Resume, p.Blocked)
}
