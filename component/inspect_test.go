package component_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers/memory"
)

func TestInspectShowsHolder(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	m := newMutex(t, component.Options{Driver: store, Application: "orders api/v2"})
	other := newMutex(t, component.Options{Driver: store})
	if _, held, err := other.Inspect(ctx, "job"); err != nil || held {
		t.Fatalf("free lock: held %v, err %v", held, err)
	}
	before := time.Now().Truncate(time.Millisecond)
	l, err := m.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	st, held, err := other.Inspect(ctx, "job")
	if err != nil || !held {
		t.Fatalf("held lock: held %v, err %v", held, err)
	}
	host, _ := os.Hostname()
	want := component.Holder{Application: "orders_api_v2", Host: host, PID: os.Getpid()}
	got := st.Holder
	got.AcquiredAt = time.Time{}
	if !st.HolderKnown || got != want {
		t.Fatalf("holder %+v (known %v), want %+v", st.Holder, st.HolderKnown, want)
	}
	if at := st.Holder.AcquiredAt; at.Before(before) || at.After(time.Now()) {
		t.Errorf("acquired at %v, not within the Acquire call (from %v)", at, before)
	}
	if st.Fence != l.Fence() || st.TTL <= 0 || st.TTL > component.DefaultTTL {
		t.Errorf("fence %d ttl %v, want fence %d and ttl in (0, %v]", st.Fence, st.TTL, l.Fence(), component.DefaultTTL)
	}
}

func TestListByPrefix(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	m := newMutex(t, component.Options{Driver: store, Prefix: "a:"})
	other := newMutex(t, component.Options{Driver: store, Prefix: "b:"})
	for _, n := range []string{"y", "x"} {
		if _, err := m.Acquire(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := other.Acquire(ctx, "z"); err != nil {
		t.Fatal(err)
	}
	ls, err := m.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range ls {
		names = append(names, l.Name)
		if l.Holder.PID != os.Getpid() {
			t.Errorf("%s: holder %+v", l.Name, l.Holder)
		}
	}
	if strings.Join(names, ",") != "x,y" {
		t.Fatalf("listed %v, want [x y]", names)
	}
}

func TestForceRelease(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	m := newMutex(t, component.Options{Driver: store, TTL: 300 * time.Millisecond})
	admin := newMutex(t, component.Options{Driver: store})
	l, err := m.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	ok, err := admin.ForceRelease(ctx, "job")
	if err != nil || !ok {
		t.Fatalf("force release: %v %v", ok, err)
	}
	select {
	case <-l.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("holder not told lost")
	}
	if !errors.Is(l.Err(), component.ErrLost) {
		t.Fatalf("holder's error %v, want ErrLost", l.Err())
	}
	l2, err := admin.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if l2.Fence() <= l.Fence() {
		t.Errorf("fence %d after a forced release of fence %d", l2.Fence(), l.Fence())
	}
	if ok, err := admin.ForceRelease(ctx, "free"); err != nil || ok {
		t.Errorf("force release of a free lock: %v %v", ok, err)
	}
}

// TestForceReleaseHolder: a release of the holder an inspection showed
// leaves the lock alone once another holder has it (an operator's
// confirmation coming late), and frees it while that holder has it.
func TestForceReleaseHolder(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	m := newMutex(t, component.Options{Driver: store})
	admin := newMutex(t, component.Options{Driver: store})
	a, err := m.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	seen, held, err := admin.Inspect(ctx, "job")
	if err != nil || !held {
		t.Fatalf("Inspect = %+v, %v, %v", seen, held, err)
	}
	if _, err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := m.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := admin.ForceReleaseHolder(ctx, seen); ok || err != nil {
		t.Fatalf("ForceReleaseHolder of a's status while b holds = %v, %v; want false", ok, err)
	}
	if b.Err() != nil {
		t.Fatalf("b's lock ended: %v", b.Err())
	}
	now, held, err := admin.Inspect(ctx, "job")
	if err != nil || !held || now.Fence != b.Fence() {
		t.Fatalf("Inspect after = %+v, %v, %v; want b's lock, fence %d", now, held, err, b.Fence())
	}
	if ok, err := admin.ForceReleaseHolder(ctx, now); !ok || err != nil {
		t.Fatalf("ForceReleaseHolder of b's status = %v, %v; want true", ok, err)
	}
	if _, err := admin.ForceReleaseHolder(ctx, component.LockStatus{Name: "job"}); !errors.Is(err, component.ErrNotSupported) {
		t.Errorf("ForceReleaseHolder of a status without a token: %v, want ErrNotSupported", err)
	}
}

func TestParseHolderRejectsForeignTokens(t *testing.T) {
	for _, tok := range []string{"", "abc", strings.Repeat("A", 26), strings.Repeat("A", 26) + "~a~h~x~1", strings.Repeat("A", 26) + "~a~h~1"} {
		if h, ok := component.ParseHolder(tok); ok {
			t.Errorf("ParseHolder(%q) = %+v", tok, h)
		}
	}
}
