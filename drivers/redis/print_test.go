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
	testutil.CheckOptionsPrinted(t, "redis.Options", secret, []testutil.PrintCase[Options]{
		{Name: "password", Options: Options{Addrs: []string{"cache.example:6379"}, Username: "app", Password: secret}, Show: []string{"cache.example:6379", "Password:xxxxx"}},
		{Name: "sentinel password", Options: Options{Addrs: []string{"s1.example:26379"}, MasterName: "m", SentinelPassword: secret}, Show: []string{"s1.example:26379", "SentinelPassword:xxxxx"}},
		{Name: "url", Options: Options{URL: "redis://u:" + secret + "@cache.example:6379/2?dial_timeout=3s"}, Show: []string{"redis://xxxxx@cache.example:6379/2?dial_timeout=3s"}},
		{Name: "url password only", Options: Options{URL: "redis://:" + secret + "@cache.example:6379"}, Show: []string{"redis://xxxxx@cache.example:6379"}},
		{Name: "url password as user", Options: Options{URL: "rediss://" + secret + "@cache.example:6379"}, Show: []string{"rediss://xxxxx@cache.example:6379"}},
		{Name: "url with / in the password", Options: Options{URL: "redis://u:ab/" + secret + "@cache.example:6379"}, Show: []string{"URL:xxxxx"}},
		{Name: "url with an escaped password", Options: Options{URL: "redis://u:%53" + secret[1:] + "@cache.example:6379"}, Show: []string{"redis://xxxxx@cache.example:6379"}},
		{Name: "url that does not parse", Options: Options{URL: "redis://u:" + secret + "@cache.example:port"}, Show: []string{"URL:xxxxx"}},
		{Name: "url without scheme", Options: Options{URL: "u:" + secret + "@cache.example:6379"}, Show: []string{"URL:xxxxx"}},
		{Name: "url without user", Options: Options{URL: "redis://cache.example:6379/1"}, Show: []string{"redis://cache.example:6379/1"}},
	})
}
