package postgres

import (
	"strings"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestTableInspectTextProtocol: Inspect and List read the ttl left in the
// text form the simple protocol uses (behind PgBouncer), whatever the
// session's IntervalStyle.
func TestTableInspectTextProtocol(t *testing.T) {
	for _, params := range []string{
		"default_query_exec_mode=simple_protocol&options=-c%20IntervalStyle%3Diso_8601",
		"default_query_exec_mode=exec&options=-c%20IntervalStyle%3Dsql_standard",
	} {
		t.Run(params, func(t *testing.T) {
			ctx := ctxT(t)
			url := testutil.PostgresDSN()
			if strings.Contains(url, "?") {
				url += "&" + params
			} else {
				url += "?" + params
			}
			d, err := New(Options{URL: url, Mode: ModeTable})
			if err != nil {
				t.Fatal(err)
			}
			defer closeDriver(t, d)
			key := "inspect:text:" + time.Now().Format(time.RFC3339Nano)
			if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "t", TTL: 26 * time.Hour}); err != nil || !res.Acquired {
				t.Fatalf("Acquire = %+v, %v", res, err)
			}
			info, held, err := d.Inspect(ctx, key)
			if err != nil || !held || info.TTL <= 25*time.Hour || info.TTL > 26*time.Hour {
				t.Fatalf("Inspect = %+v, %v, %v; want a ttl in (25 h, 26 h]", info, held, err)
			}
			list, err := d.(drivers.Lister).List(ctx, key)
			if err != nil || len(list) != 1 || list[0].TTL <= 25*time.Hour {
				t.Fatalf("List = %+v, %v; want the lock with its ttl", list, err)
			}
			if ok, err := d.Release(ctx, key, "t"); !ok || err != nil {
				t.Fatalf("Release = %v, %v", ok, err)
			}
		})
	}
}
