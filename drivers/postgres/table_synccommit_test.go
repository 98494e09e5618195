package postgres

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// sqlLog records the SQL texts a connection sends.
type sqlLog struct {
	mu  sync.Mutex
	sql []string
}

func (l *sqlLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sql = append(l.sql, data.SQL)
	return ctx
}

func (l *sqlLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// setting counts the recorded statements that set synchronous_commit, but
// for those that make their own commit synchronous (the schema's creation
// and the boot check, once per driver and per connection) and the
// asynchronous commits of releases and queue entries (asyncHint).
func (l *sqlLog) setting() (sets, total int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.sql {
		s = strings.ReplaceAll(s, asyncHint, "")
		if strings.Contains(s, "synchronous_commit") && !strings.Contains(s, "set_config('synchronous_commit', 'on', true)") {
			sets++
		}
	}
	return sets, len(l.sql)
}

// sessionSettings returns synchronous_commit as every connection of p sees
// it, holding them all at once so that each is a distinct connection.
func sessionSettings(t *testing.T, ctx context.Context, p *pgxpool.Pool) []string {
	t.Helper()
	var got []string
	for range p.Config().MaxConns {
		c, err := p.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
		var v string
		if err := c.QueryRow(ctx, "SHOW synchronous_commit").Scan(&v); err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	return got
}

// TestSynchronousCommit checks where synchronousCommit takes effect: on
// every connection of the driver's own pool, from its startup, with no
// statement setting it; with a pool the application gave, in each
// statement's own transaction only, the pool's sessions keeping the
// server's setting.
func TestSynchronousCommit(t *testing.T) {
	ctx := ctxT(t)
	var server string
	c, err := pgx.Connect(ctx, testutil.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.QueryRow(ctx, "SHOW synchronous_commit").Scan(&server); err != nil {
		t.Fatal(err)
	}
	_ = c.Close(ctx)
	want := "local" // a value the server does not already have, and not asyncHint's
	if server == "local" {
		want = "remote_write"
	}
	for _, tc := range []struct {
		name      string
		given     bool   // NewWithPool
		value     string // Options.SynchronousCommit
		session   string // every pool connection's setting afterwards
		statement bool   // the driver's statements set it
	}{
		{"own pool", false, want, want, false},
		{"own pool, unset", false, "", server, false},
		{"given pool", true, want, server, true},
		{"given pool, unset", true, "", server, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := &sqlLog{}
			opts := Options{Mode: ModeTable, Table: "mutexfx_locks_sync", SynchronousCommit: tc.value, MaxConns: 3}
			var d Driver
			var p *pgxpool.Pool
			if tc.given {
				cfg, err := pgxpool.ParseConfig(testutil.PostgresDSN())
				if err != nil {
					t.Fatal(err)
				}
				cfg.MaxConns = 3
				cfg.ConnConfig.Tracer = log
				if p, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
					t.Fatal(err)
				}
				defer p.Close()
				opts.MaxConns = 0
				if d, err = NewWithPool(p, opts); err != nil {
					t.Fatal(err)
				}
			} else {
				opts.URL = testutil.PostgresDSN()
				var err error
				if d, err = New(opts); err != nil {
					t.Fatal(err)
				}
				tableOf(d).poolCfg.ConnConfig.Tracer = log
			}
			defer closeDriver(t, d)
			key := "sync:" + t.Name()
			// 3 holders at once: every connection runs the statements
			var wg sync.WaitGroup
			errs := make(chan error, 3)
			for i := range 3 {
				wg.Go(func() {
					k, tok := key+string(rune('a'+i)), "t"
					res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: k, Token: tok, TTL: time.Minute})
					if err == nil && !res.Acquired {
						err = fmt.Errorf("%s not acquired", k)
					}
					if err == nil {
						_, err = d.Release(ctx, k, tok)
					}
					errs <- err
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatalf("acquire+release: %v", err)
				}
			}
			if p == nil {
				var err error
				if p, err = tableOf(d).getPool(); err != nil {
					t.Fatal(err)
				}
			}
			sets, total := log.setting()
			if total == 0 || (sets > 0) != tc.statement {
				t.Errorf("%d of %d statements set synchronous_commit; want some: %v", sets, total, tc.statement)
			}
			for i, v := range sessionSettings(t, ctx, p) {
				if v != tc.session {
					t.Errorf("connection %d: synchronous_commit = %q; want %q (server's: %q)", i, v, tc.session, server)
				}
			}
		})
	}
}
