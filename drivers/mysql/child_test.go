package mysql

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// runChild plays a child role: "hold" takes MUTEXFX_MYSQL_KEY in
// MUTEXFX_MYSQL_MODE, prints "held" and waits to be killed; "holdmutex"
// takes it through a component.Mutex instead (see holdMutex).
func runChild(role string) int {
	switch role {
	case "hold":
	case "holdmutex":
		return holdMutex()
	default:
		fmt.Fprintf(os.Stderr, "unknown role %q\n", role)
		return 2
	}
	d, err := New(Options{DSN: testutil.MySQLDSN(), Mode: os.Getenv("MUTEXFX_MYSQL_MODE")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: os.Getenv("MUTEXFX_MYSQL_KEY"), Token: token(), TTL: time.Second})
	if err != nil || !res.Acquired {
		fmt.Fprintln(os.Stderr, "child acquire:", res, err)
		return 1
	}
	fmt.Println("held")
	select {} // until killed
}

// TestHolderKilled: a holder process killed with -9 leaves no lock behind:
// at once in advisory mode (the server sees its connection close), after
// the ttl in table mode.
func TestHolderKilled(t *testing.T) {
	for _, tc := range []struct {
		mode   string
		within time.Duration
	}{
		{ModeAdvisory, time.Second},
		{ModeTable, 3 * time.Second},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			ctx := ctxT(t)
			key := "mysqltest:" + runID + ":" + t.Name()
			child, line := testutil.StartHolder(t, "hold", "MUTEXFX_MYSQL_KEY="+key, "MUTEXFX_MYSQL_MODE="+tc.mode)
			if line != "held" {
				t.Fatalf("child said %q", line)
			}
			d := openDriver(t, Options{DSN: testutil.MySQLDSN(), Mode: tc.mode})
			req := drivers.AcquireRequest{Key: key, Token: token(), TTL: time.Second}
			if res, err := d.Acquire(ctx, req); err != nil || res.Acquired {
				t.Fatalf("Acquire while the child holds = %+v, %v", res, err)
			}
			killed := testutil.KillHolder(t, child)
			waitFor(t, tc.within, "the dead holder's lock", func() bool {
				res, err := d.Acquire(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				return res.Acquired
			})
			t.Logf("acquired %v after kill -9", time.Since(killed))
			if ok, err := d.Release(ctx, key, req.Token); err != nil || !ok {
				t.Fatalf("Release = %v, %v", ok, err)
			}
		})
	}
}
