package component_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mutexfx/mutexfx/component"
)

// TestLostLockLogLine: a lock renewed every 100 ms, broken by force (as
// mutexctl release --force does) just after its tenth renewal, at 1 s, is
// found lost by its next renewal and logs one Warn line with everything an
// operator needs: store, lock, key, fence, token prefix and hash (never
// the token), held for, cause, reason, last renewal.
func TestLostLockLogLine(t *testing.T) {
	component.Unpooled(t)
	synctest.Test(t, func(t *testing.T) {
		core, logs := observer.New(zap.InfoLevel)
		drv := newSignalled()
		m, err := component.New(component.Options{Driver: drv, Name: "orders", TTL: 300 * time.Millisecond, Logger: zap.New(core)})
		if err != nil {
			t.Fatal(err)
		}
		operator, err := component.New(component.Options{Driver: drv, Name: "ops"})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		defer m.Close(ctx)
		defer operator.Close(ctx)

		// a fence above 1, to tell it from a default
		first, err := m.Acquire(ctx, "order:42")
		if err != nil {
			t.Fatal(err)
		}
		first.Release(ctx)
		l, err := m.Acquire(ctx, "order:42")
		if err != nil {
			t.Fatal(err)
		}
		if at := drv.renewedAt(t, l, time.Second); at != time.Second {
			t.Fatalf("a renewal %v after the acquisition, want one at 1 s (every ttl/3)", at)
		}
		if ok, err := operator.ForceRelease(ctx, "order:42"); !ok || err != nil {
			t.Fatalf("ForceRelease: %v %v", ok, err)
		}
		<-l.Done()
		lostAt := time.Now()

		entries := logs.FilterMessage("mutex lock lost").All()
		if len(entries) != 1 {
			t.Fatalf("%d lost-lock lines, want 1: %+v", len(entries), logs.All())
		}
		e := entries[0]
		if e.Level != zapcore.WarnLevel {
			t.Errorf("level %v, want warn", e.Level)
		}
		f := e.ContextMap()
		for key, want := range map[string]any{
			"store":        "orders",
			"lock":         "order:42",
			"key":          "mutex:order:42",
			"fence":        l.Fence(),
			"token_prefix": l.Token()[:8],
			"token_sha256": component.TokenHash(l.Token()),
			// the memory store tells no one: the next renewal, at 1.1 s,
			// finds the lock gone
			"held_for": 1100 * time.Millisecond,
			"cause":    component.CauseGoneOrTaken,
		} {
			if f[key] != want {
				t.Errorf("%s = %v (%T), want %v (%T)", key, f[key], f[key], want, want)
			}
		}
		if l.Fence() < 2 {
			t.Errorf("fence %d, want at least 2", l.Fence())
		}
		last, ok := f["last_renewal"].(time.Time)
		if !ok || last.Before(lostAt.Add(-100*time.Millisecond)) || last.After(lostAt) {
			t.Errorf("last_renewal %v, want within the last renewal interval before %v", f["last_renewal"], lostAt)
		}
		if since := f["since_last_renewal"]; since != lostAt.Sub(last) {
			t.Errorf("since_last_renewal %v, want %v", since, lostAt.Sub(last))
		}
		if f["reason"] == "" || f["reason"] == nil {
			t.Error("no reason")
		}
		for key, v := range f {
			if s, ok := v.(string); ok && s == l.Token() {
				t.Errorf("%s logs the whole token", key)
			}
		}
	})
}
