package postgres

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// descriptors counts this process's open sockets and anonymous-inode
// descriptors (epoll, eventfd).
func descriptors(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && (strings.HasPrefix(target, "socket:") || strings.HasPrefix(target, "anon_inode:")) {
			n++
		}
	}
	return n
}

// TestBrokenSessionsLeakNothing: the connection of a session the server
// terminated is closed once the hang-up watch tells of it (nothing else
// closes it: the driver forgets the session), and Close closes the
// watch's own descriptors.
func TestBrokenSessionsLeakNothing(t *testing.T) {
	ctx := ctxT(t)
	app := fmt.Sprintf("mutexfx_hup_%d", time.Now().UnixNano())
	sep := "?"
	if strings.Contains(testutil.PostgresDSN(), "?") {
		sep = "&"
	}
	d, err := New(Options{URL: testutil.PostgresDSN() + sep + "application_name=" + app, MaxSessions: 1})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, testutil.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.WithoutCancel(ctx))
	before := descriptors(t)
	for i := range 5 {
		key := fmt.Sprintf("hup:%s:%d", app, i)
		if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "t", TTL: time.Minute}); err != nil || !res.Acquired {
			t.Fatalf("Acquire = %+v, %v", res, err)
		}
		var n int
		if err := admin.QueryRow(ctx, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n); err != nil || n == 0 {
			t.Fatalf("terminated %d sessions: %v", n, err)
		}
		within(t, 5*time.Second, "session broken", func() bool {
			a := advisoryOf(d)
			a.mu.Lock()
			defer a.mu.Unlock()
			return a.main == nil
		})
	}
	closeDriver(t, d)
	within(t, 5*time.Second, fmt.Sprintf("socket and epoll descriptors back to %d after 5 broken sessions and Close", before), func() bool {
		return descriptors(t) <= before
	})
}
