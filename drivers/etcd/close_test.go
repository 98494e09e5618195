//go:build unix

package etcd

import (
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers/drivertest"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestCloseCutsStalledCalls: Close cuts calls stuck on a stalled link (see
// drivertest.CloseCutsStalledCall), and a first connection stuck on one.
func TestCloseCutsStalledCalls(t *testing.T) {
	c := singleMember(t)
	for _, dial := range []bool{false, true} {
		name := "Call"
		if dial {
			name = "FirstDial"
		}
		t.Run(name, func(t *testing.T) {
			p := testutil.NewProxy(t, c.Members[0].ClientAddr)
			d, err := New(Options{Endpoints: []string{p.Addr}, DialTimeout: time.Minute}, nil)
			if err != nil {
				t.Fatal(err)
			}
			drivertest.CloseCutsStalled(t, d, ErrClosed, p, dial)
		})
	}
}
