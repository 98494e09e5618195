package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/config"
)

// TestNearest: an unknown key is matched to the known key it most likely
// means — another case, snake_case, a typo, a swap — and to none when no
// key is near.
func TestNearest(t *testing.T) {
	known := []string{"dialTimeout", "fenceTable", "prefix", "retryDelay", "timeout", "ttl", "url"}
	for _, tc := range []struct{ key, want string }{
		{"retrydelay", "retryDelay"},    // environment case
		{"dial_timeout", "dialTimeout"}, // snake_case
		{"fence-table", "fenceTable"},   // kebab-case
		{"tll", "ttl"},                  // swap
		{"prefx", "prefix"},             // deletion
		{"timeoutt", "timeout"},         // insertion
		{"retryDelai", "retryDelay"},    // change
		{"ur", "url"},
		{"lease", ""},
		{"size", ""},
		{"", ""},
	} {
		if got := config.Nearest(tc.key, known); got != tc.want {
			t.Errorf("Nearest(%q) = %q; want %q", tc.key, got, tc.want)
		}
	}
}

// TestDecodeSuggests: Decode's unknown-key error suggests the nearest key of
// the struct, nested ones included, and lists them all.
func TestDecodeSuggests(t *testing.T) {
	type tls struct {
		CAFile string `koanf:"caFile"`
	}
	type opts struct {
		URL         string        `koanf:"url"`
		DialTimeout time.Duration `koanf:"dialTimeout"`
		TLS         tls           `koanf:"tls"`
		Internal    string        `koanf:"-"`
	}
	for _, tc := range []struct {
		in   map[string]any
		want string
	}{
		{map[string]any{"dial_timeout": "1s"}, `d.dial_timeout: unknown key: did you mean "dialTimeout"? (known: dialTimeout, tls.caFile, url)`},
		{map[string]any{"tls": map[string]any{"cafle": "x"}}, `d.tls.cafle: unknown key: did you mean "tls.caFile"?`},
		{map[string]any{"pool": 3}, "d.pool: unknown key (known: dialTimeout, tls.caFile, url)"},
	} {
		var o opts
		err := config.Decode("d", tc.in, &o)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Decode(%v) = %v; want prefix %q", tc.in, err, tc.want)
		}
	}
	var none struct{}
	if err := config.Decode("d", map[string]any{"x": 1}, &none); err == nil || err.Error() != "d.x: unknown key (this block takes no keys)" {
		t.Errorf("Decode into a struct without keys = %v", err)
	}
}
