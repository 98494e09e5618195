package config_test

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/v2"

	"github.com/mutexfx/mutexfx/config"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// withEnv loads k's YAML, then the environment variables of env as
// MUTEXFX_MUTEX__ORDERS__DRIVER__TYPE → mutex.orders.driver.type, as
// examples/config does.
func withEnv(t *testing.T, y string, vars map[string]string) *koanf.Koanf {
	t.Helper()
	k := load(t, y)
	for name, v := range vars {
		t.Setenv(name, v)
	}
	err := k.Load(env.Provider(".", env.Opt{
		Prefix: "MUTEXFX_",
		TransformFunc: func(k, v string) (string, any) {
			return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(k, "MUTEXFX_")), "__", "."), v
		},
	}), nil)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestDriverType: an empty driver type is an error (a distributed lock must
// not quietly become a per-process one), and so are driver options without
// a type; a store without a driver block is a memory store.
func TestDriverType(t *testing.T) {
	const empty = "mutex.orders.driver.type: empty (memory, file, redis, postgres, mysql, etcd)"
	const required = "mutex.orders.driver.type: required when driver options are given"
	cases := []struct {
		name string
		yaml string
		env  map[string]string
		typ  string // the type loaded; "" when want is an error
		want string // error prefix
	}{
		{name: "no driver block", yaml: "mutex:\n  orders: {ttl: 1s}\n", typ: "memory"},
		{name: "empty driver map", yaml: "mutex:\n  orders: {driver: {}}\n", typ: "memory"},
		{name: "type only", yaml: "mutex:\n  orders: {driver: {type: redis}}\n", typ: "redis"},
		{name: "type string", yaml: "mutex:\n  orders: {driver: file}\n", typ: "file"},
		{name: "empty string", yaml: "mutex:\n  orders: {driver: ''}\n", want: empty},
		{name: "blank string", yaml: "mutex:\n  orders: {driver: ' '}\n", want: empty},
		{name: "empty type", yaml: "mutex:\n  orders: {driver: {type: ''}}\n", want: empty},
		{name: "empty type with options", yaml: "mutex:\n  orders: {driver: {type: '', addrs: [h:1]}}\n", want: empty},
		{name: "empty type from env", yaml: "mutex:\n  orders: {driver: {type: redis, addrs: [h:1]}}\n",
			env: map[string]string{"MUTEXFX_MUTEX__ORDERS__DRIVER__TYPE": ""}, want: empty},
		{name: "empty driver from env", yaml: "mutex:\n  orders: {ttl: 1s}\n",
			env: map[string]string{"MUTEXFX_MUTEX__ORDERS__DRIVER": ""}, want: empty},
		{name: "options without type", yaml: "mutex:\n  orders: {driver: {addrs: [h:1]}}\n", want: required},
		{name: "client without type", yaml: "mutex:\n  orders: {driver: {client: rdb}}\n", want: required},
		{name: "options without type from env", yaml: "mutex:\n  orders: {ttl: 1s}\n",
			env: map[string]string{"MUTEXFX_MUTEX__ORDERS__DRIVER__ADDRS": "127.0.0.1:6379"}, want: required},
		{name: "type from env", yaml: "mutex:\n  orders: {ttl: 1s}\n",
			env: map[string]string{"MUTEXFX_MUTEX__ORDERS__DRIVER__TYPE": "redis", "MUTEXFX_MUTEX__ORDERS__DRIVER__ADDRS": "h:1"}, typ: "redis"},
		{name: "url as type", yaml: "mutex:\n  orders: {driver: 'redis://u:S3cr3tPW@h:1'}\n", want: "mutex.orders.driver.type: a URL"},
		{name: "url as type in map", yaml: "mutex:\n  orders: {driver: {type: 'u:S3cr3tPW@tcp(h)/db'}}\n", want: "mutex.orders.driver.type: a URL"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := config.Load(withEnv(t, c.yaml, c.env), "")
			if c.want == "" {
				if err != nil {
					t.Fatalf("error %v; want type %q", err, c.typ)
				}
				if got := cfg.Stores[0].Driver.Type; got != c.typ {
					t.Fatalf("type %q; want %q", got, c.typ)
				}
				return
			}
			var cerr *config.Error
			if err == nil || !errors.As(err, &cerr) || !strings.HasPrefix(err.Error(), c.want) {
				t.Fatalf("error %v; want prefix %q", err, c.want)
			}
			if strings.Contains(err.Error(), "S3cr3tPW") {
				t.Fatalf("error %q shows the password", err)
			}
		})
	}
}

const secret = "S3cr3tPW"

// TestDriverPrintsNoSecret: a driver block printed in any way (fmt verbs,
// JSON, zap's JSON encoder), alone or inside a Store or a Config, shows
// that a secret is set but not its value.
func TestDriverPrintsNoSecret(t *testing.T) {
	d := config.Driver{Type: "redis", Client: "", Path: "mutex.orders.driver", Options: map[string]any{
		"url":              "redis://u:" + secret + "@h:1",
		"password":         secret,
		"sentinelPassword": secret,
		"PassWord":         secret,
		"dsn":              "app:" + secret + "@tcp(db:3306)/x",
		"nested":           map[string]any{"addrs": []any{"u:" + secret + "@h:1"}, "token": 1234567},
		"connString":       "host=h password=" + secret,
		"other":            "host=h password=" + secret,
		"addrs":            []any{"127.0.0.1:6379"},
		"channel":          "visible-channel",
	}}
	st := config.Store{Name: "orders", Path: "mutex.orders", Driver: d}
	cfg := config.Config{Stores: []config.Store{st}, Default: "orders"}
	// what the printed forms must still show: the block is recognisable
	want := []string{"visible-channel", "127.0.0.1:6379"}
	printed := testutil.Printed(map[string]any{"Driver": d, "*Driver": &d, "Store": st, "Config": cfg, "*Config": &cfg})
	for how, s := range printed {
		if strings.Contains(s, secret) || strings.Contains(s, hex.EncodeToString([]byte(secret))) {
			t.Errorf("%s shows the secret: %s", how, s)
		}
		// (Store's String names the store and its type only)
		if (strings.Contains(how, "Driver") && !strings.HasSuffix(how, "%x")) || strings.HasSuffix(how, "json") || strings.HasSuffix(how, "zap.Reflect") || strings.HasSuffix(how, "%#v") {
			for _, w := range want {
				if !strings.Contains(s, w) {
					t.Errorf("%s does not show %q: %s", how, w, s)
				}
			}
		}
	}
	if s := fmt.Sprintf("%#v", st); !strings.HasPrefix(s, "config.Store{") || !strings.Contains(s, "Driver:config.Driver{") {
		t.Errorf("%%#v of a Store: %s", s)
	}
	// the redacted copy is the printed one: the block itself is intact
	if d.Options["password"] != secret {
		t.Fatal("printing changed the driver's options")
	}
}
