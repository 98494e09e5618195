//go:build linux

package file_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/file"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// ctxT bounds a test's calls: 30 s.
func ctxT(t testing.TB) context.Context { return testutil.Context(t, 30*time.Second) }

func acquire(t testing.TB, d *file.Driver, key, token string, ttl time.Duration) drivers.AcquireResult {
	t.Helper()
	res, err := d.Acquire(ctxT(t), drivers.AcquireRequest{Key: key, Token: token, TTL: ttl})
	if err != nil {
		t.Fatalf("Acquire(%.20q, %.20q): %v", key, token, err)
	}
	return res
}

// TestNamesStayInDirectory takes a lock on every odd name at once: all
// succeed (no two names share a file) and every file lands in the directory.
func TestNamesStayInDirectory(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "locks")
	d := newDriver(t, dir)
	keys := []string{"../x", "../../x", "/", "/etc/passwd", "a/b", "\x00", "a\x00b", "", ".", "..",
		strings.Repeat("k", 10<<10), strings.Repeat("k", 10<<10) + "!", "ключ-🔒", "Lock", "lock", "LOCK", `a\b`, "-rf"}
	start := uint64(time.Now().UnixMicro())
	for i, key := range keys {
		res := acquire(t, d, key, "token-"+strconv.Itoa(i), time.Minute)
		if !res.Acquired {
			t.Fatalf("key %d (%q...) not acquired: another key shares its file", i, key[:min(len(key), 10)])
		}
		if res.Fence < start {
			t.Errorf("key %d: fence %d; want a new file's first, the clock in µs (≥ %d)", i, res.Fence, start)
		}
	}
	for i, key := range keys {
		info, ok, err := d.Inspect(ctxT(t), key)
		if err != nil || !ok || info.Token != "token-"+strconv.Itoa(i) {
			t.Errorf("Inspect(%q...) = %+v, %v, %v", key[:min(len(key), 10)], info, ok, err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	// one lock file per key, and with MechanismFlock a liveness file
	// (the lock file's name, "." and digits) per held lock
	want := len(keys) * file.DescriptorsPerLock()
	if len(entries) != want {
		t.Errorf("%d files in the directory, want %d", len(entries), want)
	}
	live := regexp.MustCompile(`\.lock\.[0-9]+$`)
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".lock") && !live.MatchString(e.Name()) {
			t.Errorf("unexpected entry %q (%v)", e.Name(), e.Type())
		}
	}
	top, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	if len(top) != 1 || top[0].Name() != "locks" {
		t.Errorf("the parent directory holds %v, want only locks/", top)
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name  string
		opts  file.Options
		field string // the invalid option's key; "" when valid
	}{
		{"valid", file.Options{Dir: "/nonexistent/mutexfx"}, ""},
		{"valid with modes", file.Options{Dir: "x", DirMode: 0o750, FileMode: 0o640, BusyTimeout: time.Second, Sync: true}, ""},
		{"no dir", file.Options{}, "dir"},
		{"dir mode not permission", file.Options{Dir: "x", DirMode: os.ModeDir | 0o700}, "dirMode"},
		{"file mode setuid", file.Options{Dir: "x", FileMode: os.ModeSetuid | 0o600}, "fileMode"},
		{"negative busy timeout", file.Options{Dir: "x", BusyTimeout: -time.Second}, "busyTimeout"},
		{"ofd", file.Options{Dir: "x", Mechanism: file.MechanismOFD}, ""},
		{"flock", file.Options{Dir: "x", Mechanism: file.MechanismFlock}, ""},
		{"unknown mechanism", file.Options{Dir: "x", Mechanism: "posix"}, "mechanism"},
		{"windows mechanism", file.Options{Dir: "x", Mechanism: file.MechanismLockFile}, "mechanism"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := file.New(tc.opts)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				if err := d.Close(context.Background()); err != nil {
					t.Fatalf("Close: %v", err)
				}
				return
			}
			var oe *drivers.OptionsError
			if !errors.Is(err, file.ErrOptions) || !errors.As(err, &oe) || oe.Key != tc.field || !strings.HasPrefix(err.Error(), tc.field+": ") {
				t.Fatalf("New: err %v, want an invalid %s", err, tc.field)
			}
		})
	}
}

// TestLazy: New and Subscribe create nothing; the first acquisition creates
// the directory with the configured mode.
func TestLazy(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	d := newDriver(t, dir)
	cancel, err := d.Subscribe(ctxT(t), func(drivers.Event) {})
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	if info, ok, err := d.Inspect(ctxT(t), "k"); err != nil || ok {
		t.Fatalf("Inspect before use: %+v, %v, %v", info, ok, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("directory exists before the first acquisition: %v", err)
	}
	if !acquire(t, d, "k", "t", time.Minute).Acquired {
		t.Fatal("not acquired")
	}
	st, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		t.Errorf("directory mode %v, want no group or other access (0700)", st.Mode().Perm())
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.lock"))
	if len(files) != 1 {
		t.Fatalf("lock files %v", files)
	}
	if st, err := os.Stat(files[0]); err != nil || st.Mode().Perm()&0o077 != 0 {
		t.Errorf("lock file mode %v (%v), want 0600", st.Mode().Perm(), err)
	}
}

// TestTokenOwnership: only the holder's token releases or extends.
func TestTokenOwnership(t *testing.T) {
	dir := t.TempDir()
	d1, d2 := newDriver(t, dir), newDriver(t, dir)
	if !acquire(t, d1, "k", "owner", time.Minute).Acquired {
		t.Fatal("not acquired")
	}
	ctx := ctxT(t)
	steps := []struct {
		name string
		do   func() (bool, error)
		want bool
	}{
		{"acquire by another token", func() (bool, error) {
			r, err := d2.Acquire(ctx, drivers.AcquireRequest{Key: "k", Token: "other", TTL: time.Minute})
			return r.Acquired, err
		}, false},
		{"acquire again by the owner's token", func() (bool, error) {
			r, err := d1.Acquire(ctx, drivers.AcquireRequest{Key: "k", Token: "owner", TTL: time.Minute})
			return r.Acquired, err
		}, false},
		{"release by another token", func() (bool, error) { return d2.Release(ctx, "k", "other") }, false},
		{"extend by another token", func() (bool, error) { return d2.Extend(ctx, "k", "other", time.Minute) }, false},
		{"release of a name never used", func() (bool, error) { return d2.Release(ctx, "never", "owner") }, false},
		{"extend by the owner", func() (bool, error) { return d1.Extend(ctx, "k", "owner", time.Minute) }, true},
		{"extend by the owner's token through another instance", func() (bool, error) { return d2.Extend(ctx, "k", "owner", time.Minute) }, true},
		{"release by the owner", func() (bool, error) { return d1.Release(ctx, "k", "owner") }, true},
		{"second release", func() (bool, error) { return d1.Release(ctx, "k", "owner") }, false},
		{"extend after release", func() (bool, error) { return d1.Extend(ctx, "k", "owner", time.Minute) }, false},
		{"acquire by another token after release", func() (bool, error) {
			r, err := d2.Acquire(ctx, drivers.AcquireRequest{Key: "k", Token: "other", TTL: time.Minute})
			return r.Acquired, err
		}, true},
	}
	for _, s := range steps {
		got, err := s.do()
		if err != nil || got != s.want {
			t.Fatalf("%s: %v, %v; want %v", s.name, got, err, s.want)
		}
	}
}

// TestExpiredTakeOver: a live holder that stops renewing loses the lock
// after its ttl; the next holder gets the next fence and the old one can
// neither extend nor release.
func TestExpiredTakeOver(t *testing.T) {
	dir := t.TempDir()
	d1, d2 := newDriver(t, dir), newDriver(t, dir)
	const ttl = 150 * time.Millisecond
	first := acquire(t, d1, "k", "old", ttl)
	if !first.Acquired {
		t.Fatal("not acquired")
	}
	start := time.Now()
	res := acquire(t, d2, "k", "new", time.Minute)
	if res.Acquired || res.HolderTTL <= 0 || res.HolderTTL > ttl {
		t.Fatalf("Acquire while held: %+v, want busy with a HolderTTL in (0, %v]", res, ttl)
	}
	testutil.Poll(t, 5*time.Second, "the expired lock taken over", func() bool {
		res = acquire(t, d2, "k", "new", time.Minute)
		return res.Acquired
	})
	if el := time.Since(start); el < ttl-10*time.Millisecond {
		t.Errorf("taken over after %v, before the ttl %v", el, ttl)
	}
	if res.Fence != first.Fence+1 {
		t.Errorf("fence %d, want %d", res.Fence, first.Fence+1)
	}
	ctx := ctxT(t)
	if ok, err := d1.Extend(ctx, "k", "old", time.Minute); ok || err != nil {
		t.Errorf("old holder Extend: %v, %v", ok, err)
	}
	if ok, err := d1.Release(ctx, "k", "old"); ok || err != nil {
		t.Errorf("old holder Release: %v, %v", ok, err)
	}
	if info, ok, err := d1.Inspect(ctx, "k"); err != nil || !ok || info.Token != "new" || info.Fence != res.Fence {
		t.Errorf("Inspect: %+v, %v, %v", info, ok, err)
	}
}

// TestFenceGrowth: the fence grows by one with every acquisition, whichever
// instance takes it, however the previous holder ended (release, expiry,
// close), and survives every driver being closed.
func TestFenceGrowth(t *testing.T) {
	dir := t.TempDir()
	d1, d2 := newDriver(t, dir), newDriver(t, dir)
	ctx := ctxT(t)
	last := uint64(time.Now().UnixMicro()) // a new file's first fence is the clock in µs
	endings := []struct {
		name string
		d    *file.Driver
		end  func(d *file.Driver, token string)
	}{
		{"release", d1, func(d *file.Driver, token string) { _, _ = d.Release(ctx, "k", token) }},
		{"release other instance", d2, func(d *file.Driver, token string) { _, _ = d.Release(ctx, "k", token) }},
		{"expiry", d1, func(d *file.Driver, token string) { expired(t, d, "k") }},
		{"driver closed", newDriver(t, dir), func(d *file.Driver, token string) { _ = d.Close(ctx) }},
		{"new driver after all closed", newDriver(t, dir), func(d *file.Driver, token string) { _, _ = d.Release(ctx, "k", token) }},
	}
	for i, e := range endings {
		token := e.name
		res := acquire(t, e.d, "k", token, 20*time.Millisecond)
		if !res.Acquired {
			t.Fatalf("%s: not acquired", e.name)
		}
		if i == 0 && res.Fence < last || i > 0 && res.Fence != last+1 {
			t.Fatalf("%s (#%d): fence %d, want %d", e.name, i, res.Fence, last+1)
		}
		last = res.Fence
		e.end(e.d, token)
	}
	_ = d1.Close(ctx)
	_ = d2.Close(ctx)
	d3 := newDriver(t, dir)
	if res := acquire(t, d3, "k", "after", time.Minute); !res.Acquired || res.Fence != last+1 {
		t.Fatalf("after closing every driver: %+v, want fence %d", res, last+1)
	}
}

// TestCloseFreesLocks: closing a driver frees its locks at once, as the end
// of its process would.
func TestCloseFreesLocks(t *testing.T) {
	dir := t.TempDir()
	d1, d2 := newDriver(t, dir), newDriver(t, dir)
	if !acquire(t, d1, "k", "a", time.Hour).Acquired {
		t.Fatal("not acquired")
	}
	if acquire(t, d2, "k", "b", time.Hour).Acquired {
		t.Fatal("acquired while held")
	}
	if err := d1.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if !acquire(t, d2, "k", "b", time.Hour).Acquired {
		t.Fatal("lock of a closed driver not taken over at once")
	}
	if _, err := d1.Acquire(ctxT(t), drivers.AcquireRequest{Key: "x", Token: "a", TTL: time.Second}); !errors.Is(err, file.ErrClosed) {
		t.Errorf("Acquire after Close: %v, want ErrClosed", err)
	}
}

// TestBadRequests: requests the driver refuses, and a lock file someone
// else scribbled on.
func TestBadRequests(t *testing.T) {
	dir := t.TempDir()
	d := newDriver(t, dir)
	tests := []struct {
		name string
		req  drivers.AcquireRequest
	}{
		{"empty token", drivers.AcquireRequest{Key: "k", TTL: time.Second}},
		{"token too long", drivers.AcquireRequest{Key: "k", Token: strings.Repeat("t", file.MaxTokenLen+1), TTL: time.Second}},
		{"zero ttl", drivers.AcquireRequest{Key: "k", Token: "t"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if res, err := d.Acquire(ctxT(t), tc.req); err == nil {
				t.Fatalf("Acquire: %+v, want an error", res)
			}
		})
	}
	t.Run("canceled ctx", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := d.Acquire(ctx, drivers.AcquireRequest{Key: "k", Token: "t", TTL: time.Second}); !errors.Is(err, context.Canceled) {
			t.Fatalf("Acquire: %v, want context.Canceled", err)
		}
	})
	t.Run("corrupt file", func(t *testing.T) {
		if !acquire(t, d, "c", "t", time.Minute).Acquired {
			t.Fatal("not acquired")
		}
		files, _ := filepath.Glob(filepath.Join(dir, "c-*.lock"))
		if len(files) != 1 {
			t.Fatalf("files %v", files)
		}
		if err := os.WriteFile(files[0], []byte("not a lock record, clearly not at all"), 0o600); err != nil {
			t.Fatal(err)
		}
		d2 := newDriver(t, dir)
		if _, err := d2.Acquire(ctxT(t), drivers.AcquireRequest{Key: "c", Token: "u", TTL: time.Second}); !errors.Is(err, file.ErrCorrupt) {
			t.Fatalf("Acquire: %v, want ErrCorrupt", err)
		}
	})
}
