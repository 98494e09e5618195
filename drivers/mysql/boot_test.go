package mysql

import (
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestHeldLockHolds: the probe's rule. A lock is its session's while the
// server names its connection id, was taken (by the server's clock) more
// than bootSlack seconds after the server's second of boot, and the boot
// time stays the one first seen.
func TestHeldLockHolds(t *testing.T) {
	const boot, id = 1_700_000_000, 42
	null := sql.NullInt64{}
	v := func(n int64) sql.NullInt64 { return sql.NullInt64{Int64: n, Valid: true} }
	for _, tc := range []struct {
		name     string
		takenAt  int64
		seen     int64 // boot time seen by an earlier probe; 0: none
		id, boot sql.NullInt64
		want     bool
	}{
		{"held", boot + 100, 0, v(id), v(boot), true},
		{"free", boot + 100, 0, null, v(boot), false},
		{"another session", boot + 100, 0, v(id + 1), v(boot), false},
		{"boot unknown", boot + 100, 0, v(id), null, true},
		{"taken before the boot: reused id", boot - 5, 0, v(id), v(boot), false},
		{"taken in the boot's second", boot, 0, v(id), v(boot), false},
		{"taken within the slack", boot + bootSlack, 0, v(id), v(boot), false},
		{"taken just past the slack", boot + bootSlack + 1, 0, v(id), v(boot), true},
		{"same boot as seen", boot + 100, boot, v(id), v(boot), true},
		{"boot seen a second off", boot + 100, boot - 1, v(id), v(boot), true},
		{"another server, up before the lock", boot + 100, boot - 50, v(id), v(boot), false},
		{"boot unknown after one seen", boot + 100, boot - 50, v(id), null, true},
		// A session read once per connection (advisory_session.go) is read with the
		// boot time, which its locks start with: a restart is caught even
		// when the clock went back between that reading and the restart.
		{"session read before the clock went back, then a restart", boot + 7200, boot, v(id), v(boot + 6600), false},
		{"session read two seconds past the boot, boot read a second late", boot + 2*bootSlack + 1, boot, v(id), v(boot + 1), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &heldLock{connID: id, takenAt: tc.takenAt}
			h.boot.Store(tc.seen)
			if got := h.holds(tc.id, tc.boot); got != tc.want {
				t.Fatalf("holds(%v, %v) = %v; want %v", tc.id, tc.boot, got, tc.want)
			}
			if tc.want && tc.boot.Valid && h.boot.Load() == 0 {
				t.Fatal("the boot time of a held lock is not remembered")
			}
		})
	}
}

// TestAdvisoryProbeBootTime: a held lock survives many probe rounds (the
// monitor's, forced every 10ms, and renewals), whose statement reads the
// server's boot time; the acquisition does not (one statement each for
// acquire and release). A server without the first status table is asked
// with the next.
func TestAdvisoryProbeBootTime(t *testing.T) {
	admin := openDB(t, testutil.MySQLDSN())
	var boot int64
	if err := admin.QueryRowContext(ctxT(t), "SELECT "+bootSQL[0]).Scan(&boot); err != nil {
		t.Fatal(err)
	}

	t.Run("HeldOverProbes", func(t *testing.T) {
		ctx := ctxT(t)
		log := &testutil.StatementLog{}
		d := givenDriver(t, loggingDB(t, log, true), Options{ProbeInterval: 10 * time.Millisecond})
		lost := lostEvents(ctx, t, d, 1)
		key, tok := "mysqltest:"+runID+":"+t.Name(), token()
		// not counted: the fence sequence, made at the first acquisition
		if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key + ":warm", Token: tok, TTL: time.Minute}); err != nil || !res.Acquired {
			t.Fatalf("Acquire = %+v, %v", res, err)
		}
		if ok, err := d.Release(ctx, key+":warm", tok); err != nil || !ok {
			t.Fatalf("Release = %v, %v", ok, err)
		}
		log.Take()
		if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute}); err != nil || !res.Acquired {
			t.Fatalf("Acquire = %+v, %v", res, err)
		}
		if got := notProbes(log.Take()); len(got) != 1 || !strings.Contains(got[0], "GET_LOCK") || strings.Contains(got[0], "Uptime") {
			t.Fatalf("acquisition statements %q; want one GET_LOCK, without the boot time", got)
		}
		probes := 0
		count := func() {
			for _, q := range log.Take() {
				if strings.Contains(q, "IS_USED_LOCK") {
					probes++
					if !strings.Contains(q, "information_schema.GLOBAL_STATUS") {
						t.Fatalf("probe %q does not read the boot time", q)
					}
				}
			}
		}
		waitFor(t, 10*time.Second, "5 probes of the monitor", func() bool { count(); return probes >= 5 })
		for range 5 {
			if r := d.Renew(ctx, []drivers.Lease{{Key: key, Token: tok, TTL: time.Minute}})[0]; r.Err != nil || !r.Held {
				t.Fatalf("Renew = %+v; want held", r)
			}
		}
		count()
		if probes < 10 {
			t.Fatalf("%d probes; want at least 10 (the monitor's and 5 renewals)", probes)
		}
		select {
		case ev := <-lost:
			t.Fatalf("a held lock reported lost over %d probes: %+v", probes, ev)
		default:
		}
		if got := adv(d).get(key, tok).boot.Load(); got != boot {
			t.Fatalf("boot time seen by the probes %d; want the server's %d", got, boot)
		}
		if info, held, err := d.Inspect(ctx, key); err != nil || !held || info.Token != tok {
			t.Fatalf("Inspect = %+v, %v, %v; want held by %q", info, held, err, tok)
		}
		if ok, err := d.Release(ctx, key, tok); err != nil || !ok {
			t.Fatalf("Release = %v, %v", ok, err)
		}
		if got := notProbes(log.Take()); len(got) != 1 || !strings.Contains(got[0], "RELEASE_LOCK") {
			t.Fatalf("release statements %q; want one RELEASE_LOCK", got)
		}
	})

	t.Run("NextSource", func(t *testing.T) {
		ctx := ctxT(t)
		d := openDriver(t, Options{DSN: testutil.MySQLDSN(), ProbeInterval: time.Hour})
		// as MySQL 8 answers for information_schema.GLOBAL_STATUS (1109)
		adv(d).bootSQL = append([]string{uptimeSQL("information_schema.NO_SUCH_STATUS")}, bootSQL...)
		key, tok := "mysqltest:"+runID+":"+t.Name(), token()
		if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute}); err != nil || !res.Acquired {
			t.Fatalf("Acquire = %+v, %v", res, err)
		}
		for range 2 {
			if r := d.Renew(ctx, []drivers.Lease{{Key: key, Token: tok, TTL: time.Minute}})[0]; r.Err != nil || !r.Held {
				t.Fatalf("Renew = %+v; want held", r)
			}
		}
		if src := adv(d).bootSrc.Load(); src != 1 {
			t.Fatalf("boot time source %d; want 1, the first that exists", src)
		}
		if got := adv(d).get(key, tok).boot.Load(); got != boot {
			t.Fatalf("boot time seen %d; want the server's %d", got, boot)
		}
	})
}

// notProbes returns the statements of qs that are not probes.
func notProbes(qs []string) []string {
	var out []string
	for _, q := range qs {
		if !strings.Contains(q, "IS_USED_LOCK") {
			out = append(out, q)
		}
	}
	return out
}
