package redis

import (
	"testing"

	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestOptionsPrintNoSecret: Options printed with any verb that reaches Format, JSON-encoded or
// logged through zap (Any, Reflect, as a field of another struct) show
// that a password is set (xxxxx), never the password nor a URL's user part.
func TestOptionsPrintNoSecret(t *testing.T) {
	const secret = "S3cr3tPW"
	type wrapper struct{ Opts Options }
	for _, tc := range []struct {
		name string
		o    Options
		show []string // what printing must still show
	}{
		{"password", Options{Addrs: []string{"cache.example:6379"}, Username: "app", Password: secret}, []string{"cache.example:6379", "Password:xxxxx"}},
		{"sentinel password", Options{Addrs: []string{"s1.example:26379"}, MasterName: "m", SentinelPassword: secret}, []string{"s1.example:26379", "SentinelPassword:xxxxx"}},
		{"url", Options{URL: "redis://u:" + secret + "@cache.example:6379/2?dial_timeout=3s"}, []string{"redis://xxxxx@cache.example:6379/2?dial_timeout=3s"}},
		{"url password only", Options{URL: "redis://:" + secret + "@cache.example:6379"}, []string{"redis://xxxxx@cache.example:6379"}},
		{"url password as user", Options{URL: "rediss://" + secret + "@cache.example:6379"}, []string{"rediss://xxxxx@cache.example:6379"}},
		{"url with / in the password", Options{URL: "redis://u:ab/" + secret + "@cache.example:6379"}, []string{"URL:xxxxx"}},
		{"url with an escaped password", Options{URL: "redis://u:%53" + secret[1:] + "@cache.example:6379"}, []string{"redis://xxxxx@cache.example:6379"}},
		{"url that does not parse", Options{URL: "redis://u:" + secret + "@cache.example:port"}, []string{"URL:xxxxx"}},
		{"url without scheme", Options{URL: "u:" + secret + "@cache.example:6379"}, []string{"URL:xxxxx"}},
		{"url without user", Options{URL: "redis://cache.example:6379/1"}, []string{"redis://cache.example:6379/1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			testutil.CheckPrintedNoSecret(t, "redis.Options", o, &o, wrapper{o}, secret, tc.show)
		})
	}
}
