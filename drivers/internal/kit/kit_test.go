package kit_test

import (
	"context"
	"crypto/tls"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/kit"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestSetKey: the first key naming a set field wins; a key also names the
// fields whose tags extend it with an upper-case letter, and no others.
func TestSetKey(t *testing.T) {
	type opts struct {
		URL       string        `koanf:"url"`
		URLs      []string      `koanf:"urls"`
		TLS       bool          `koanf:"tls"`
		TLSCAFile string        `koanf:"tlsCAFile"`
		Timeout   time.Duration `koanf:"timeout"`
	}
	keys := []string{"url", "tls", "timeout"}
	for _, tc := range []struct {
		name string
		o    opts
		want string
	}{
		{"none set", opts{}, ""},
		{"one", opts{Timeout: time.Second}, "timeout"},
		{"first of two", opts{URL: "u", Timeout: time.Second}, "url"},
		{"a field the key's tag extends", opts{TLSCAFile: "ca.pem"}, "tls"},
		{"lower-case extension is another key", opts{URLs: []string{"u"}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := kit.SetKey(tc.o, keys...); got != tc.want {
				t.Fatalf("SetKey = %q; want %q", got, tc.want)
			}
		})
	}
}

// TestPollDelay: the poll interval, or just past a holder's shorter ttl.
func TestPollDelay(t *testing.T) {
	for _, tc := range []struct {
		ttl, want time.Duration
	}{
		{0, drivers.WaitPollInterval},
		{time.Hour, drivers.WaitPollInterval},
		{20 * time.Millisecond, 21 * time.Millisecond},
	} {
		if got := kit.PollDelay(tc.ttl, drivers.WaitPollInterval); got != tc.want {
			t.Errorf("PollDelay(%v) = %v; want %v", tc.ttl, got, tc.want)
		}
	}
}

// TestPacer: each tick comes after its delay, the last one at the
// deadline, and the wait is then over.
func TestPacer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		p := kit.NewPacer(250 * time.Millisecond)
		defer p.Stop()
		for _, want := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 250 * time.Millisecond} {
			tick, ok := p.After(100 * time.Millisecond)
			if !ok {
				t.Fatalf("wait over before %v", want)
			}
			<-tick
			if got := time.Since(start); got != want {
				t.Fatalf("tick at %v; want %v", got, want)
			}
		}
		if _, ok := p.After(100 * time.Millisecond); ok {
			t.Fatal("wait not over at its deadline")
		}
	})
}

// TestCloseOnce: the first call sets closed and clears, later ones do
// nothing; CheckOpen reports ErrClosed from then on.
func TestCloseOnce(t *testing.T) {
	var (
		mu      sync.Mutex
		closed  bool
		cleared int
	)
	if err := kit.CheckOpen(&mu, &closed); err != nil {
		t.Fatalf("CheckOpen before Close = %v", err)
	}
	for i, want := range []bool{true, false} {
		if got := kit.CloseOnce(&mu, &closed, func() { cleared++ }); got != want {
			t.Fatalf("call %d: CloseOnce = %t; want %t", i, got, want)
		}
	}
	if cleared != 1 || !errors.Is(kit.CheckOpen(&mu, &closed), drivers.ErrClosed) {
		t.Fatalf("cleared %d times, CheckOpen = %v; want once, ErrClosed", cleared, kit.CheckOpen(&mu, &closed))
	}
}

// TestLockOpen: an ended ctx and a closed driver are refused with mu
// free; an open driver's mu is left held.
func TestLockOpen(t *testing.T) {
	var (
		mu     sync.Mutex
		closed bool
	)
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if err := kit.LockOpen(ended, &mu, &closed); !errors.Is(err, context.Canceled) || !mu.TryLock() {
		t.Fatalf("LockOpen with an ended ctx = %v, mu held; want context.Canceled, mu free", err)
	}
	mu.Unlock()
	if err := kit.LockOpen(context.Background(), &mu, &closed); err != nil || mu.TryLock() {
		t.Fatalf("LockOpen = %v, mu free; want nil, mu held", err)
	}
	closed = true
	mu.Unlock()
	if err := kit.LockOpen(context.Background(), &mu, &closed); !errors.Is(err, drivers.ErrClosed) || !mu.TryLock() {
		t.Fatalf("LockOpen when closed = %v, mu held; want ErrClosed, mu free", err)
	}
	mu.Unlock()
}

// TestTLSConfig: a nil configuration becomes a new TLS 1.2+ one; unset
// options leave a given one's settings; a bad CA file is an invalid option.
func TestTLSConfig(t *testing.T) {
	ca := testutil.NewTestCA(t)
	tc, err := kit.TLSConfig(nil, ca.CAFile, "db.example", true)
	if err != nil || tc.MinVersion != tls.VersionTLS12 || tc.ServerName != "db.example" || !tc.InsecureSkipVerify || tc.RootCAs == nil {
		t.Fatalf("TLSConfig(nil, ...) = %+v, %v; want TLS 1.2+, the name, no verification, the CAs", tc, err)
	}
	given := &tls.Config{ServerName: "url.example", InsecureSkipVerify: true} //nolint:gosec // a test value
	if tc, err := kit.TLSConfig(given, "", "", false); err != nil || tc != given || tc.ServerName != "url.example" || !tc.InsecureSkipVerify {
		t.Fatalf("TLSConfig(given, unset) = %+v, %v; want given unchanged", tc, err)
	}
	if _, err := kit.TLSConfig(nil, filepath.Join(t.TempDir(), "none.pem"), "", false); !errors.Is(err, drivers.ErrOptions) {
		t.Fatalf("TLSConfig with a missing CA file = %v; want ErrOptions", err)
	}
}

// TestCAPool: a PEM CA file gives a pool; a missing file or one without a
// certificate is an invalid tlsCAFile.
func TestCAPool(t *testing.T) {
	ca := testutil.NewTestCA(t)
	empty := filepath.Join(t.TempDir(), "empty.pem")
	if err := os.WriteFile(empty, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, file, wantErr string
	}{
		{"CA file", ca.CAFile, ""},
		{"missing", filepath.Join(t.TempDir(), "none.pem"), "tlsCAFile: open "},
		{"no certificate", empty, "tlsCAFile: no PEM certificate in "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool, err := kit.CAPool(tc.file)
			switch {
			case tc.wantErr == "" && (err != nil || pool == nil):
				t.Fatalf("CAPool = %v, %v; want a pool", pool, err)
			case tc.wantErr != "" && (!errors.Is(err, drivers.ErrOptions) || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("CAPool error %v; want ErrOptions with %q", err, tc.wantErr)
			}
		})
	}
}
