//go:build unix

package etcd

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// endpointsEnv passes the cluster's endpoints to a child process.
const endpointsEnv = "MUTEXFX_ETCD_ENDPOINTS"

// runChild plays a child role: "holder" takes the lock "paused", prints
// "fence N", then prints "lost" when it is told the lock is lost.
func runChild(role string) int {
	if role != "holder" {
		fmt.Fprintf(os.Stderr, "unknown role %q\n", role)
		return 2
	}
	d, err := New(Options{Endpoints: strings.Split(os.Getenv(endpointsEnv), ",")}, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	m, err := component.New(component.Options{Driver: d, TTL: faultTTL})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	defer m.Close(ctx)
	l, err := m.Acquire(ctx, "paused")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("fence %d\n", l.Fence())
	select {
	case <-l.Done():
		fmt.Println("lost")
		return 0
	case <-ctx.Done():
		return 1
	}
}

// TestHolderPausedPastTTL: a holder process stopped (SIGSTOP) past its
// ttl loses the lock to another holder, with a greater fence, no sooner
// than the ttl; resumed, it is told at once that its lock is lost.
func TestHolderPausedPastTTL(t *testing.T) {
	c := testutil.StartEtcd(t, 3)
	cmd := testutil.Child(t, "holder", endpointsEnv+"="+strings.Join(c.Endpoints(), ","))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		s := bufio.NewScanner(out)
		for s.Scan() {
			lines <- s.Text()
		}
	}()
	next := func(what string) string {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("child exited before %s", what)
			}
			return l
		case <-time.After(30 * time.Second):
			t.Fatalf("no %s from the child within 30 s", what)
			return ""
		}
	}
	var fence uint64
	if _, err := fmt.Sscanf(next("fence"), "fence %d", &fence); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	m := mutex(t, open(t, Options{Endpoints: c.Endpoints()}))
	l, err := m.Acquire(t.Context(), "paused", component.WithTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(paused)
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if got := next("loss"); got != "lost" {
		t.Fatalf("child said %q; want lost", got)
	}
	if took < faultTTL {
		t.Fatalf("taken %v after the holder stopped; the ttl is %v", took, faultTTL)
	}
	if l.Fence() <= fence {
		t.Fatalf("fence %d after the paused holder's %d", l.Fence(), fence)
	}
	if ok, err := l.Release(t.Context()); !ok || err != nil {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	for range lines {
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
}
