package postgres

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// runChild plays a re-executed test binary's role.
func runChild(role string) int {
	switch role {
	case "hold":
		// take MUTEXFX_PG_KEY in MUTEXFX_PG_MODE, say "held", hold until killed
		d, err := New(Options{URL: testutil.PostgresDSN(), Mode: os.Getenv("MUTEXFX_PG_MODE")})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		res, err := d.Acquire(context.Background(), drivers.AcquireRequest{
			Key: os.Getenv("MUTEXFX_PG_KEY"), Token: "child", TTL: time.Second})
		if err != nil || !res.Acquired {
			fmt.Fprintln(os.Stderr, "child acquire:", res, err)
			return 1
		}
		fmt.Println("held")
		select {}
	default:
		fmt.Fprintf(os.Stderr, "unknown child role %q\n", role)
		return 2
	}
}

// TestKilledHolder contends with another process that is killed with -9
// while it holds the lock: advisory locks (which never expire) pass over
// once the server sees the connection close, table locks at the holder's
// ttl (1 s). The bounds are loose on purpose, wide enough for a loaded
// machine: how fast the hand-over is belongs to the benchmarks
// (BenchmarkHangupGap); here the advisory lock passing at all shows the
// close was seen, and the table lock passing well before the 5 s wait
// ends shows its expiry was.
func TestKilledHolder(t *testing.T) {
	cases := []struct {
		mode string
		max  time.Duration
	}{
		{ModeAdvisory, 3 * time.Second},
		{ModeTable, 3 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.mode, func(t *testing.T) {
			ctx := ctxT(t)
			name := "killed-" + fmt.Sprint(time.Now().UnixNano())
			cmd, line := testutil.StartHolder(t, "hold", "MUTEXFX_PG_MODE="+tc.mode, "MUTEXFX_PG_KEY=fault:"+name)
			if line != "held" {
				t.Fatalf("child said %q", line)
			}
			m := mutexOn(t, shared(t, Options{Mode: tc.mode}), time.Second)
			if l, err := m.TryAcquire(ctx, name); !errors.Is(err, component.ErrLocked) {
				t.Fatalf("TryAcquire = %v, %v while the child holds the lock; want ErrLocked", l, err)
			}
			killed := testutil.KillHolder(t, cmd)
			l, err := m.Acquire(ctx, name, component.WithTimeout(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			took := time.Since(killed)
			t.Logf("%s: acquired %v after kill -9 of the holder", tc.mode, took)
			if took > tc.max {
				t.Fatalf("took %v; want ≤ %v", took, tc.max)
			}
			_, _ = l.Release(ctx)
		})
	}
}
