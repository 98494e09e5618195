package component

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
)

// TestStatusFromStoreHolder: a lock whose token the store does not keep
// is shown with the holder the store tells (drivers.LockInfo.Holder),
// without an acquisition time; anything else is an unknown holder.
func TestStatusFromStoreHolder(t *testing.T) {
	for _, tc := range []struct {
		holder string
		want   Holder
		known  bool
	}{
		{"~orders~db-1.example~4242", Holder{Application: "orders", Host: "db-1.example", PID: 4242}, true},
		{"", Holder{}, false},
		{"psql", Holder{}, false},
		{"orders~db-1~4242", Holder{}, false},
		{"~orders~db-1~x", Holder{}, false},
		{"~orders~db-1~4242~extra", Holder{}, false},
	} {
		st := status("n", drivers.LockInfo{Holder: tc.holder})
		if st.HolderKnown != tc.known || st.Holder != tc.want || st.token != "" {
			t.Errorf("Holder %q: status %+v; want %+v (known %v)", tc.holder, st, tc.want, tc.known)
		}
	}
	// a token the store keeps wins
	st := status("n", drivers.LockInfo{Token: "plain", Holder: "~orders~db-1~1"})
	if st.HolderKnown {
		t.Errorf("a foreign token with a store holder: %+v; want unknown", st)
	}
}

// TestAppendMillis: the token's time is written as strconv writes it in
// base 36, so ParseHolder (and tokens of earlier versions) read it alike.
func TestAppendMillis(t *testing.T) {
	for _, ms := range []int64{0, 1, 35, 36, 37, 1295, 1296, 1297, 36*1296 - 1, 36 * 1296, 1296 * 1296, time.Now().UnixMilli(), 101559956668415, math.MaxInt64, -1, -36, math.MinInt64} {
		if got, want := string(appendMillis([]byte("x"), ms)), "x"+strconv.FormatInt(ms, 36); got != want {
			t.Errorf("appendMillis(%d) = %q; want %q", ms, got, want)
		}
	}
	for ms := range int64(36*36*36 + 1) { // every length of 1 to 4 digits
		if got, want := string(appendMillis(nil, ms)), strconv.FormatInt(ms, 36); got != want {
			t.Fatalf("appendMillis(%d) = %q; want %q", ms, got, want)
		}
	}
}

// TestBase32Bytes: each byte becomes the base32 character of its low 5
// bits, as rand.Text maps it, whatever its value and its place.
func TestBase32Bytes(t *testing.T) {
	for n := range 2*8 + 3 {
		for c := range 256 {
			r := make([]byte, n)
			for i := range r {
				r[i] = byte(c + i*7)
			}
			want := make([]byte, n)
			for i, b := range r {
				want[i] = b32Alphabet[b%32]
			}
			if base32Bytes(r); string(r) != string(want) {
				t.Fatalf("%d bytes from %d: %q; want %q", n, c, r, want)
			}
		}
	}
}

// TestNewToken: a token is 130 random bits in base32, this process's
// identity and the attempt's time, which ParseHolder reads back; no two
// are alike.
func TestNewToken(t *testing.T) {
	m := &Mutex{ident: identSuffix(strings.Repeat("a", 40))}
	now := time.UnixMilli(time.Now().UnixMilli())
	seen := map[string]bool{}
	for range 1000 {
		tok := m.newToken(now)
		if seen[tok[:randLen]] {
			t.Fatalf("random part %q twice", tok[:randLen])
		}
		seen[tok[:randLen]] = true
		if i := strings.IndexFunc(tok[:randLen], func(c rune) bool { return !strings.ContainsRune(b32Alphabet, c) }); i >= 0 {
			t.Fatalf("token %q: random part not base32 at %d", tok, i)
		}
		host, pid := process()
		h, ok := ParseHolder(tok)
		want := Holder{Application: strings.Repeat("a", maxAppLen), Host: clean(host, maxHostLen), PID: pid, AcquiredAt: now}
		if !ok || h != want {
			t.Fatalf("ParseHolder(%q) = %+v, %v; want %+v", tok, h, ok, want)
		}
	}
}

// TestKeyToken: the key and the token made in one allocation are the
// prefix and name, and a token of this process, for any length of name.
func TestKeyToken(t *testing.T) {
	m := &Mutex{ident: identSuffix("app")}
	now := time.UnixMilli(time.Now().UnixMilli())
	for _, name := range []string{"", "x", strings.Repeat("n", 60), strings.Repeat("n", 200), strings.Repeat("n", 1000)} {
		key, tok := m.keyToken("p:", name, now)
		if want := "p:" + name; key != want {
			t.Errorf("keyToken(%d bytes): key %q; want %q", len(name), key, want)
		}
		if h, ok := ParseHolder(tok); !ok || h.Application != "app" || !h.AcquiredAt.Equal(now) {
			t.Errorf("keyToken(%d bytes): token %q reads as %+v, %v", len(name), tok, h, ok)
		}
	}
}
