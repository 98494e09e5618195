package mutexfx_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx"
	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/redis"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestCheck: a store not used yet is not checked (nor connected), a used
// one answering is healthy, a used one whose server is gone fails the
// check with its name and without its password.
func TestCheck(t *testing.T) {
	ctx := context.Background()
	// a port nobody listens on
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()

	newRedis := func(url string) *mutexfx.Mutex {
		drv, err := redis.New(redis.Options{URL: url})
		if err != nil {
			t.Fatal(err)
		}
		m, err := component.New(component.Options{Driver: drv, TTL: time.Second, Timeout: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close(ctx) })
		return m
	}
	live, down, idle := newRedis("redis://"+testutil.RedisAddr()),
		newRedis("redis://user:s3cret@"+dead), newRedis("redis://user:s3cret@"+dead)
	mem, err := mutexfx.New(mutexfx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mem.Close(ctx) })
	r := mutexfx.NewRegistry(map[string]*mutexfx.Mutex{"live": live, "down": down, "idle": idle, "mem": mem}, "")

	// use all but idle
	l, err := live.Acquire(ctx, "check")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if _, err := down.Acquire(ctx, "check"); err == nil {
		t.Fatal("acquired on a dead server")
	}
	if _, err := mem.TryAcquire(ctx, "check"); err != nil {
		t.Fatal(err)
	}

	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	health, err := r.Check(cctx)
	want := map[string]bool{"down": true, "idle": false, "live": true, "mem": true}
	for _, h := range health {
		if h.Checked != want[h.Store] {
			t.Errorf("%s: checked %v, want %v", h.Store, h.Checked, want[h.Store])
		}
		if (h.Err != nil) != (h.Store == "down") {
			t.Errorf("%s: error %v", h.Store, h.Err)
		}
	}
	if len(health) != 4 {
		t.Errorf("%d stores checked, want 4", len(health))
	}
	if !errors.Is(err, component.ErrDriver) || !strings.Contains(err.Error(), `store "down"`) {
		t.Errorf("Check: %v, want a store error naming down", err)
	}
	if err != nil && strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Check's error leaks the password: %v", err)
	}
}

// TestCheckSQL: Check pings the PostgreSQL and MySQL stores in use.
func TestCheckSQL(t *testing.T) {
	ctx := context.Background()
	y := fmt.Sprintf("mutex:\n  pg: {driver: {type: postgres, url: %q}}\n  my: {driver: {type: mysql, dsn: %q}}\n",
		testutil.PostgresDSN(), testutil.MySQLDSN())
	r, err := mutexfx.Open(yamlConfig(t, y), allDrivers)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	for _, name := range []string{"pg", "my"} {
		m, _ := r.Get(name)
		if _, ok := m.Driver().(drivers.Pinger); !ok {
			t.Errorf("store %s: driver %T is no drivers.Pinger", name, m.Driver())
		}
		l, err := m.Acquire(ctx, fmt.Sprintf("check-%d", time.Now().UnixNano()))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(ctx)
	}
	health, err := r.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range health {
		if !h.Checked {
			t.Errorf("%s not checked", h.Store)
		}
	}
}
