package config_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/rawbytes"
	"github.com/knadh/koanf/v2"
	"go.uber.org/goleak"

	"github.com/mutexfx/mutexfx/config"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func load(t *testing.T, y string) *koanf.Koanf {
	t.Helper()
	k := koanf.New(".")
	if err := k.Load(rawbytes.Provider([]byte(y)), yaml.Parser()); err != nil {
		t.Fatalf("yaml: %v", err)
	}
	return k
}

func TestLoad(t *testing.T) {
	k := load(t, `
mutex:
  orders:
    driver: {type: file, dir: /tmp/locks}
    prefix: "orders:"
    ttl: 5000
    timeout: nowait
    retryDelay: 25ms
    application: orders-api.v2_1
    traceAll: true
  reports:
    driver: memory
    ttl: 1m
    timeout: infinite
    default: true
`)
	cfg, err := config.Load(k, "")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Default != "reports" || len(cfg.Stores) != 2 {
		t.Fatalf("cfg = %+v", cfg)
	}
	o := cfg.Stores[0]
	if o.Name != "orders" || o.Path != "mutex.orders" || o.Driver.Type != "file" || o.Driver.Path != "mutex.orders.driver" ||
		o.Driver.Options["dir"] != "/tmp/locks" || o.Prefix != "orders:" || o.Application != "orders-api.v2_1" || !o.TraceAll {
		t.Fatalf("orders = %+v", o)
	}
	// Integers are milliseconds (koanf alone would read 5000 ns), nowait is
	// one attempt.
	if o.TTL != 5*time.Second || o.Timeout != config.NoWait || o.RetryDelay != 25*time.Millisecond {
		t.Fatalf("orders durations = %v %v %v", o.TTL, o.Timeout, o.RetryDelay)
	}
	r := cfg.Stores[1]
	if r.Driver.Type != "memory" || r.TTL != time.Minute || r.Timeout != config.Forever || r.Application != "" || r.TraceAll {
		t.Fatalf("reports = %+v", r)
	}
}

func TestLoadDefaults(t *testing.T) {
	// first is the first store (stores sort by name): its driver type,
	// ttl, timeout and retry delay as loaded (0: unset, the component's
	// defaults apply)
	type first struct {
		typ          string
		ttl, timeout time.Duration
		retryDelay   time.Duration
	}
	cases := []struct {
		yaml, def string
		stores    int
		first     first
	}{
		{``, "mutex", 1, first{typ: "memory"}},                                                                 // nothing configured: one memory store
		{"mutex:\n  jobs: {}\n", "jobs", 1, first{typ: "memory"}},                                              // the only store
		{"mutex:\n  a: {}\n  mutex: {}\n", "mutex", 2, first{typ: "memory"}},                                   // the store named mutex
		{"mutex:\n  a: {}\n  b: {}\n", "", 2, first{typ: "memory"}},                                            // none
		{"mutex:\n  a: {}\n  b: {default: true}\n", "b", 2, first{typ: "memory"}},                              // marked
		{"other:\n  x: 1\nmutex:\n  a: {ttl: 1s}\n", "a", 1, first{typ: "memory", ttl: time.Second}},           // other keys untouched
		{"mutex:\n  a: {driver: {}}\n", "a", 1, first{typ: "memory"}},                                          // an empty block: memory
		{"mutex:\n  a: {driver: {type: redis}}\n", "a", 1, first{typ: "redis"}},                                // any type: checked by the module
		{"mutex:\n  a: {timeout: -1, retrydelay: 0}\n", "a", 1, first{typ: "memory", timeout: config.Forever}}, // env-style lower case
		{"mutex:\n  a: {timeout: nowait, retryDelay: 20ms}\n", "a", 1, first{typ: "memory", timeout: config.NoWait, retryDelay: 20 * time.Millisecond}},
		{"mutex:\n  a: {timeout: ' NoWait '}\n", "a", 1, first{typ: "memory", timeout: config.NoWait}},
		{"mutex:\n  a: {timeout: '-1'}\n", "a", 1, first{typ: "memory", timeout: config.Forever}},          // -1 as the environment gives it
		{"mutex:\n  a: {}\n  mutex: {default: false}\n", "", 2, first{typ: "memory"}},                      // mutex, but not the default
		{"mutex:\n  mutex: {default: false}\n", "", 1, first{typ: "memory"}},                               // the only store, not the default
		{"mutex:\n  jobs: {default: 'false'}\n", "", 1, first{typ: "memory"}},                              // the same from the environment
		{"mutex:\n  a: {default: true}\n  mutex: {default: false}\n", "a", 2, first{typ: "memory"}},        // marked, the other not
		{"mutex:\n  a: {}\n  mutex: {default: true}\n", "mutex", 2, first{typ: "memory"}},                  // marked and named mutex
		{"mutex:\n  a: {driver: {Type: redis, type: file}}\n", "a", 1, first{typ: "file"}},                 // two spellings: lower case wins
		{"mutex:\n  a: {driver: {TYPE: postgres, Type: redis, type: file}}\n", "a", 1, first{typ: "file"}}, // three
		{"mutex:\n  a: {driver: {Type: redis, Client: x, client: rdb}}\n", "a", 1, first{typ: "redis"}},    // the lower-case client wins, checked below
	}
	// check reports whether cfg is what c wants; if not, it fails the test.
	check := func(c struct {
		yaml, def string
		stores    int
		first     first
	}, cfg config.Config) bool {
		if cfg.Default != c.def || len(cfg.Stores) != c.stores {
			t.Errorf("%q: default %q, %d stores; want %q, %d", c.yaml, cfg.Default, len(cfg.Stores), c.def, c.stores)
			return false
		}
		st := cfg.Stores[0]
		if got := (first{st.Driver.Type, st.TTL, st.Timeout, st.RetryDelay}); got != c.first {
			t.Errorf("%q: first store %+v; want %+v", c.yaml, got, c.first)
			return false
		}
		if st.Driver.Client != "" && st.Driver.Client != "rdb" {
			t.Errorf("%q: client %q, want rdb", c.yaml, st.Driver.Client)
			return false
		}
		return true
	}
	for _, c := range cases {
		for range 20 { // the same whatever the maps' iteration order
			cfg, err := config.Load(load(t, c.yaml), "")
			if err != nil {
				t.Errorf("%q: %v", c.yaml, err)
				break
			}
			if !check(c, cfg) {
				break
			}
		}
	}
}

func TestLoadErrors(t *testing.T) {
	cases := []struct{ yaml, want string }{
		{"mutex:\n  orders: {ttl: 0}\n", "mutex.orders.ttl: must be positive (leave the key out for the default, 30s)"},
		{"mutex:\n  orders: {timeout: 0}\n", "mutex.orders.timeout: zero is not a timeout: write nowait for one attempt, or leave the key out for the default (10s)"},
		{"mutex:\n  orders: {timeout: 0s}\n", "mutex.orders.timeout: zero is not a timeout"},
		{"mutex:\n  orders: {ttl: 900000h}\n", "mutex.orders.ttl: must be at most 100 years"},
		{"mutex:\n  orders: {ttl: -5}\n", "mutex.orders.ttl: negative duration -5 ms: only -1"},
		{"mutex:\n  orders: {ttl: -1}\n", "mutex.orders.ttl: cannot be infinite: use a long ttl; locks are renewed"},
		{"mutex:\n  orders: {ttl: infinite}\n", "mutex.orders.ttl: cannot be infinite: use a long ttl; locks are renewed"},
		{"mutex:\n  orders: {maxNameLength: 0}\n", "mutex.orders.maxNameLength: must be a whole number of at least 1, got 0"},
		{"mutex:\n  orders: {maxNameLength: -3}\n", "mutex.orders.maxNameLength: must be a whole number of at least 1, got -3"},
		{"mutex:\n  orders: {maxNameLength: 1.5}\n", "mutex.orders.maxNameLength: must be a whole number of at least 1, got 1.5"},
		{"mutex:\n  orders: {maxNameLength: lots}\n", "mutex.orders.maxNameLength: must be a whole number of at least 1, got lots"},
		{"mutex:\n  orders: {maxnamelen: 3}\n", `mutex.orders.maxnamelen: unknown key: did you mean "maxNameLength"? (known: application, default, driver, maxNameLength, prefix, retryDelay, timeout, traceAll, ttl)`},
		{"mutex:\n  orders: {retry_delay: 1s}\n", `mutex.orders.retry_delay: unknown key: did you mean "retryDelay"?`},
		{"mutex:\n  orders: {trace_all: true}\n", `mutex.orders.trace_all: unknown key: did you mean "traceAll"?`},
		{"mutex:\n  orders: {lease: 1s}\n", "mutex.orders.lease: unknown key (known: application, default, driver, maxNameLength, prefix, retryDelay, timeout, traceAll, ttl)"},
		{"mutex:\n  orders: {timeout: -100}\n", "mutex.orders.timeout: negative duration -100 ms: only -1"},
		{"mutex:\n  orders: {timeout: '-100'}\n", "mutex.orders.timeout: negative duration -100 ms: only -1"},
		{"mutex:\n  orders: {timeout: -0.5}\n", "mutex.orders.timeout: negative duration -0.5 ms: only -1"},
		{"mutex:\n  orders: {timeout: -100ms}\n", "mutex.orders.timeout: must not be negative (-1 or \"infinite\": no limit), got -100ms"},
		{"mutex:\n  orders: {retryDelay: -2}\n", "mutex.orders.retryDelay: negative duration -2 ms: only -1"},
		{"mutex:\n  orders: {ttl: 5ns}\n", "mutex.orders.ttl: must be at least 10ms"},
		{"mutex:\n  orders: {ttl: soon}\n", `mutex.orders.ttl: invalid duration "soon"`},
		{"mutex:\n  orders: {ttl: [1]}\n", "mutex.orders.ttl: invalid duration of type"},
		{"mutex:\n  orders: {tll: 1s}\n", `mutex.orders.tll: unknown key: did you mean "ttl"?`},
		{"mutex:\n  orders: {retryDelay: -1ms}\n", "mutex.orders.retryDelay: must not be negative"},
		{"mutex:\n  orders: {prefix: ''}\n", "mutex.orders.prefix: must not be empty"},
		{"mutex:\n  orders: {prefix: 3}\n", "mutex.orders.prefix: must be a string"},
		{"mutex:\n  orders: {default: yes please}\n", "mutex.orders.default: must be true or false"},
		{"mutex:\n  orders: {traceAll: sometimes}\n", "mutex.orders.traceAll: must be true or false"},
		{"mutex:\n  orders: {application: ''}\n", "mutex.orders.application: must not be empty"},
		{"mutex:\n  orders: {application: 7}\n", "mutex.orders.application: must be a string"},
		{"mutex:\n  orders: {application: orders api}\n", `mutex.orders.application: byte 6 (' ') not allowed: only letters, digits, '.', '_' and '-'`},
		{"mutex:\n  orders: {application: \"a~b\"}\n", `mutex.orders.application: byte 1 ('~') not allowed`},
		{"mutex:\n  orders: {application: " + strings.Repeat("a", 33) + "}\n", "mutex.orders.application: must be at most 32 bytes, got 33"},
		{"mutex:\n  orders: 3\n", "mutex.orders: must be a map"},
		{"mutex: 3\n", "mutex: must be a map of stores"},
		{"mutex: {}\n", "mutex: no store configured"},
		{"mutex:\n  orders: {driver: 3}\n", "mutex.orders.driver: must be a driver type or a map"},
		{"mutex:\n  orders: {driver: {type: 3}}\n", "mutex.orders.driver.type: must be a string"},
		{"mutex:\n  orders: {driver: {client: ''}}\n", "mutex.orders.driver.client: must name a client"},
		{"mutex:\n  orders: {driver: {Type: 3, type: file}}\n", "mutex.orders.driver.Type: must be a string"},
		{"mutex:\n  orders: {driver: {Client: rdb, client: ''}}\n", "mutex.orders.driver.client: must name a client"},
		{"mutex:\n  a: {default: true}\n  b: {default: true}\n", `mutex.b.default: store "a" is already the default`},
		{"mutex:\n  Orders: {ttl: 1s}\n  orders: {ttl: 2s}\n", `mutex.orders: differs from store "Orders" only in case`},
	}
	for _, c := range cases {
		_, err := config.Load(load(t, c.yaml), "")
		var cerr *config.Error
		if err == nil || !errors.As(err, &cerr) || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q: error %v; want prefix %q", c.yaml, err, c.want)
		}
	}
}

func TestEnvOverride(t *testing.T) {
	k := load(t, "mutex:\n  orders: {ttl: 30s, retryDelay: 50ms}\n")
	t.Setenv("APP_MUTEX__ORDERS__TTL", "2500")
	t.Setenv("APP_MUTEX__ORDERS__RETRYDELAY", "10ms")
	t.Setenv("APP_MUTEX__ORDERS__DEFAULT", "true")
	err := k.Load(env.Provider(".", env.Opt{
		Prefix: "APP_",
		TransformFunc: func(k, v string) (string, any) {
			return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(k, "APP_")), "__", "."), v
		},
	}), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(k, "")
	if err != nil {
		t.Fatal(err)
	}
	// retryDelay (YAML) and retrydelay (env) are one key: koanf keeps both
	// spellings and the lower-case one, the environment's, wins.
	st := cfg.Stores[0]
	if !st.Default {
		t.Error("default: \"true\" from the environment not read as true")
	}
	if st.TTL != 2500*time.Millisecond || st.RetryDelay != 10*time.Millisecond {
		t.Fatalf("from env: ttl %v, retryDelay %v; want 2.5s, 10ms", st.TTL, st.RetryDelay)
	}
}

func TestDecode(t *testing.T) {
	type opts struct {
		Dir     string        `koanf:"dir"`
		Timeout time.Duration `koanf:"timeout"`
		Busy    time.Duration `koanf:"busyTimeout"`
		Pool    int           `koanf:"poolSize"`
	}
	var o opts
	err := config.Decode("mutex.a.driver", map[string]any{"dir": "/x", "timeout": 1500, "poolsize": "4"}, &o)
	if err != nil || o.Dir != "/x" || o.Timeout != 1500*time.Millisecond || o.Pool != 4 {
		t.Fatalf("Decode = %+v, %v", o, err)
	}
	// a file's poolSize overridden by the environment's poolsize: one key,
	// the lower-case spelling wins
	o = opts{}
	err = config.Decode("mutex.a.driver", map[string]any{"poolSize": 2, "poolsize": "4"}, &o)
	if err != nil || o.Pool != 4 {
		t.Fatalf("Decode of two spellings = %+v, %v; want poolSize 4", o, err)
	}
	// -1 is the one negative number: no limit
	o = opts{}
	err = config.Decode("mutex.a.driver", map[string]any{"busyTimeout": -1, "timeout": "infinite"}, &o)
	if err != nil || o.Busy != config.Forever || o.Timeout != config.Forever {
		t.Fatalf("Decode of -1 = %+v, %v; want Forever", o, err)
	}
	cases := []struct {
		in   map[string]any
		want string
	}{
		{map[string]any{"dri": "/x"}, "mutex.a.driver.dri: unknown key"},
		{map[string]any{"timeout": "later"}, "mutex.a.driver.timeout: "},
		{map[string]any{"poolSize": "many"}, "mutex.a.driver.poolSize: "},
		{map[string]any{"busyTimeout": -5}, "mutex.a.driver.busyTimeout: negative duration -5 ms: only -1"},
		{map[string]any{"busyTimeout": "-100"}, "mutex.a.driver.busyTimeout: negative duration -100 ms: only -1"},
		{map[string]any{"timeout": int64(-2)}, "mutex.a.driver.timeout: negative duration -2 ms: only -1"},
	}
	for _, c := range cases {
		err := config.Decode("mutex.a.driver", c.in, &opts{})
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("Decode(%v) = %v; want prefix %q", c.in, err, c.want)
		}
	}
}

func TestParseDuration(t *testing.T) {
	cases := []struct {
		in   any
		want time.Duration
	}{
		{"30s", 30 * time.Second}, {30000, 30 * time.Second}, {int64(5), 5 * time.Millisecond},
		{"250", 250 * time.Millisecond}, {1.5, 1500 * time.Microsecond}, {"forever", config.Forever},
		{"Infinite", config.Forever}, {-1, config.Forever}, {uint8(2), 2 * time.Millisecond}, {time.Second, time.Second},
		{"-1", config.Forever}, {-1.0, config.Forever}, {int64(-1), config.Forever}, {"-100ms", -100 * time.Millisecond}, // a Go duration: the key checks its sign
	}
	for _, c := range cases {
		if got, err := config.ParseDuration(c.in); err != nil || got != c.want {
			t.Errorf("ParseDuration(%#v) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []any{"soon", true, 1e300, nil, -100, -2, int8(-5), "-100", -0.5, -1e300} {
		if _, err := config.ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%#v) accepted", bad)
		}
	}
}
