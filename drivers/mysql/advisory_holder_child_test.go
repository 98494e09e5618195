package mysql

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// holdMutex (child role "holdmutex") takes the lock MUTEXFX_MYSQL_KEY
// through a component.Mutex whose prefix is MUTEXFX_MYSQL_PREFIX, on an
// advisory driver with the fence MUTEXFX_MYSQL_FENCE (its table
// MUTEXFX_MYSQL_FENCE_TABLE), prints "held" and waits to be killed.
func holdMutex() int {
	d, err := New(Options{DSN: testutil.MySQLDSN(), Fence: os.Getenv("MUTEXFX_MYSQL_FENCE"), FenceTable: os.Getenv("MUTEXFX_MYSQL_FENCE_TABLE")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	m, err := component.New(component.Options{Driver: d, TTL: 5 * time.Second, Prefix: os.Getenv("MUTEXFX_MYSQL_PREFIX")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := m.Acquire(ctx, os.Getenv("MUTEXFX_MYSQL_KEY")); err != nil {
		fmt.Fprintln(os.Stderr, "child acquire:", err)
		return 1
	}
	fmt.Println("held")
	select {} // until killed
}

// TestAdvisoryHolderOtherProcess: Inspect and a Mutex's Inspect, in this
// process, of an advisory lock another process holds tell that process's
// host and pid; once it is killed the lock is free.
func TestAdvisoryHolderOtherProcess(t *testing.T) {
	for fence, opts := range fenceOpts() {
		t.Run(fence, func(t *testing.T) {
			ctx := ctxT(t)
			prefix := "mysqltest:" + runID + ":" + rand.Text()[:8] + ":"
			child := testutil.Child(t, "holdmutex", "MUTEXFX_MYSQL_KEY=job", "MUTEXFX_MYSQL_PREFIX="+prefix,
				"MUTEXFX_MYSQL_FENCE="+opts.Fence, "MUTEXFX_MYSQL_FENCE_TABLE="+opts.FenceTable)
			out, err := child.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := child.Start(); err != nil {
				t.Fatal(err)
			}
			if line, err := bufio.NewReader(out).ReadString('\n'); strings.TrimSpace(line) != "held" {
				t.Fatalf("child said %q, %v", line, err)
			}
			host, _ := os.Hostname()
			d := openDriver(t, opts)
			want := fmt.Sprintf("~%s~%d", host, child.Process.Pid)
			if info, held, err := d.Inspect(ctx, prefix+"job"); err != nil || !held || !strings.HasSuffix(info.Holder, want) {
				t.Fatalf("Inspect = %+v, %v, %v; want held by %s", info, held, err, want)
			}
			m, err := component.New(component.Options{Driver: d, TTL: 5 * time.Second, Prefix: prefix})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close(ctx)
			st, held, err := m.Inspect(ctx, "job")
			if err != nil || !held || !st.HolderKnown || st.Holder.Host != host || st.Holder.PID != child.Process.Pid {
				t.Fatalf("Mutex.Inspect = %+v, %v, %v; want held by %s pid %d", st, held, err, host, child.Process.Pid)
			}
			if err := child.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = child.Wait()
			waitFor(t, 5*time.Second, "the killed holder's lock to be free", func() bool {
				_, held, err := d.Inspect(ctx, prefix+"job")
				return err == nil && !held
			})
		})
	}
}
