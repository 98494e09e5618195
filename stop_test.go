package mutexfx_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"
	"go.uber.org/fx"
	fxt "go.uber.org/fx/fxtest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mutexfx/mutexfx"
	"github.com/mutexfx/mutexfx/drivers/etcd"
	"github.com/mutexfx/mutexfx/drivers/mysql"
	"github.com/mutexfx/mutexfx/drivers/postgres"
	"github.com/mutexfx/mutexfx/drivers/redis"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// stuckStores is the configuration of one store of each networked mode and
// a file store; the networked ones reach their server through a proxy of
// their own (proxies, by store name), so that a test can freeze a link.
func stuckStores(t *testing.T, prefix string) (yaml string, proxies map[string]*testutil.Proxy) {
	t.Helper()
	proxies = map[string]*testutil.Proxy{}
	proxied := func(name, addr string) string {
		p := testutil.NewProxy(t, addr)
		proxies[name] = p
		return p.Addr
	}
	pg, err := url.Parse(testutil.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	my, err := mysqldrv.ParseDSN(testutil.MySQLDSN())
	if err != nil {
		t.Fatal(err)
	}
	pgURL := func(name string) string {
		u := *pg
		u.Host = proxied(name, pg.Host)
		return u.String()
	}
	myDSN := func(name string) string {
		c := *my
		c.Addr = proxied(name, my.Addr)
		return c.FormatDSN()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "mutex:\n")
	store := func(name, driver string) {
		fmt.Fprintf(&b, "  %s: {prefix: %q, ttl: 30s, driver: %s}\n", name, prefix, driver)
	}
	store("redis", fmt.Sprintf("{type: redis, url: %q}", "redis://"+proxied("redis", testutil.RedisAddr())))
	store("pgadvisory", fmt.Sprintf("{type: postgres, url: %q}", pgURL("pgadvisory")))
	store("pgtable", fmt.Sprintf("{type: postgres, mode: table, url: %q}", pgURL("pgtable")))
	store("myadvisory", fmt.Sprintf("{type: mysql, dsn: %q}", myDSN("myadvisory")))
	store("mytable", fmt.Sprintf("{type: mysql, mode: table, dsn: %q}", myDSN("mytable")))
	store("file", fmt.Sprintf("{type: file, dir: %q}", t.TempDir()))
	fmt.Fprintf(&b, "  mutex: {default: true}\n")
	return b.String(), proxies
}

var allDrivers = mutexfx.WithDrivers(redis.Factory(), postgres.Factory(), mysql.Factory(), etcd.Factory())

// startStuckApp starts an app on stuckStores whose every store holds three
// locks, and returns its registry, the locks by store and the logs.
func startStuckApp(t *testing.T) (*fxt.App, *mutexfx.Registry, map[string][]*mutexfx.Lock, map[string]*testutil.Proxy, *observer.ObservedLogs, string) {
	t.Helper()
	prefix := "stuck-" + rand.Text()[:10] + ":"
	y, proxies := stuckStores(t, prefix)
	core, logs := observer.New(zap.WarnLevel)
	var reg *mutexfx.Registry
	app := fxt.New(t, mutexfx.Module(yamlConfig(t, y), allDrivers), fx.Supply(zap.New(core)), fx.Populate(&reg), fx.NopLogger)
	app.RequireStart()
	held := map[string][]*mutexfx.Lock{}
	for _, name := range reg.Names() {
		m, _ := reg.Get(name)
		for i := range 3 {
			l, err := m.Acquire(context.Background(), fmt.Sprintf("lock-%d", i))
			if err != nil {
				t.Fatalf("store %s: %v", name, err)
			}
			held[name] = append(held[name], l)
		}
	}
	return app, reg, held, proxies, logs, prefix
}

// TestStopWithAFrozenStore: with Redis's link frozen, Stop releases the
// locks of every other store — checked by another client, which takes
// them at once although their ttl is 30 s — returns by its deadline, ends
// every lock's context with ErrClosed, leaves no store accepting work, and
// names the store that did not close in a warning.
func TestStopWithAFrozenStore(t *testing.T) {
	app, reg, held, proxies, logs, prefix := startStuckApp(t)
	proxies["redis"].Stall()
	const deadline = 3 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	err := app.Stop(ctx)
	took := time.Since(start)
	if err == nil {
		t.Error("Stop: no error although the redis store could not release its locks")
	}
	if took > deadline+100*time.Millisecond {
		t.Errorf("Stop took %v; deadline %v", took, deadline)
	}
	checkClosed(t, reg, held)
	// From outside: a second application on the same servers (links not
	// frozen) takes every lock of the healthy stores at once.
	y, _ := stuckStores(t, prefix)
	other, err := mutexfx.Open(yamlConfig(t, y), allDrivers)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	for name, locks := range held {
		if name == "redis" {
			continue
		}
		m, _ := other.Get(name)
		for _, l := range locks {
			got, err := m.TryAcquire(context.Background(), l.Name())
			if err != nil || got == nil {
				t.Errorf("store %s: lock %s still held after Stop (err %v)", name, l.Name(), err)
				continue
			}
			if _, err := got.Release(context.Background()); err != nil {
				t.Error(err)
			}
		}
	}
	warned := logs.FilterMessageSnippet("did not close").FilterField(zap.String("store", "redis"))
	if warned.Len() != 1 {
		t.Errorf("want one warning naming store redis; logs: %v", logs.All())
	}
}

// TestStopWithEveryLinkFrozen: every networked link frozen, Stop returns
// within its deadline (and 100 ms), every lock ended with ErrClosed.
func TestStopWithEveryLinkFrozen(t *testing.T) {
	app, reg, held, proxies, _, _ := startStuckApp(t)
	for _, p := range proxies {
		p.Stall()
	}
	const deadline = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	err := app.Stop(ctx)
	took := time.Since(start)
	if err == nil {
		t.Error("Stop: no error although no networked store could release its locks")
	}
	if took > deadline+100*time.Millisecond {
		t.Errorf("Stop took %v; deadline %v", took, deadline)
	}
	checkClosed(t, reg, held)
	for _, p := range proxies {
		p.Resume() // let the drivers' connections end
	}
}

// checkClosed: every lock has ended with ErrClosed and no store takes work.
func checkClosed(t *testing.T, reg *mutexfx.Registry, held map[string][]*mutexfx.Lock) {
	t.Helper()
	for name, locks := range held {
		for _, l := range locks {
			if err := l.Err(); !errors.Is(err, mutexfx.ErrClosed) {
				t.Errorf("store %s: lock %s: Err() = %v; want ErrClosed", name, l.Name(), err)
			}
		}
		m, _ := reg.Get(name)
		if n := len(m.Held()); n != 0 {
			t.Errorf("store %s: Held() = %d after Stop", name, n)
		}
		if l, err := m.TryAcquire(context.Background(), "after-stop"); l != nil || !errors.Is(err, mutexfx.ErrClosed) {
			t.Errorf("store %s: TryAcquire after Stop = %v, %v; want ErrClosed", name, l, err)
		}
	}
}
