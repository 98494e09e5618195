package mysql

import (
	"cmp"
	"fmt"
	"maps"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/kit"
)

// Modes of the driver.
const (
	// ModeAdvisory holds each lock with GET_LOCK on a connection pinned for
	// it; it ends with that connection and is per server.
	ModeAdvisory = "advisory"
	// ModeTable holds each lock as a row expiring by the database clock;
	// it works on clusters (Galera, Group Replication).
	ModeTable = "table"
)

// Fence sources of the advisory mode.
const (
	// FenceAuto picks FenceSequence on MariaDB and FenceCounter elsewhere.
	FenceAuto = "auto"
	// FenceSequence takes fences from a MariaDB SEQUENCE (10.3+) in the
	// GET_LOCK statement: no row write per acquisition.
	FenceSequence = "sequence"
	// FenceCounter keeps a counter row per key, incremented by the GET_LOCK
	// statement (MySQL 8 has no sequences): a commit per acquisition.
	FenceCounter = "counter"
	// FenceUUIDShort takes fences from UUID_SHORT(): no table, the
	// cheapest. Opt-in: UUID_SHORT is (server_id & 255) << 56 + start time
	// in s << 24 + a counter, so fences grow only while server_id stays, the
	// clock does not go back across a restart, and the server averages
	// under 2^24 calls per second of uptime.
	FenceUUIDShort = "uuid_short"
)

// Defaults of Options.
const (
	DefaultTable          = "mutexfx_locks"
	DefaultFenceTable     = "mutexfx_fence"
	DefaultProbeInterval  = 500 * time.Millisecond
	DefaultPollInterval   = 10 * time.Millisecond
	DefaultWaiterLiveness = 100 * time.Millisecond
	DefaultRenewBatch     = 1000
	DefaultRetries        = 3
	DefaultDialTimeout    = 5 * time.Second
	DefaultMaxIdleConns   = 16
)

// Options configure a Driver. The zero value connects as root without
// password to 127.0.0.1:3306 in advisory mode. Configuration keys are the
// koanf tags.
type Options struct {
	// DSN is a go-sql-driver/mysql DSN ("user:pass@tcp(host:3306)/db");
	// when set, Host, Port, Database, Username, Password and TLS must be
	// empty. Default "".
	DSN string `koanf:"dsn"`
	// Host is the server's host name or address. Default "127.0.0.1".
	Host string `koanf:"host"`
	// Port is the server's TCP port. Default 3306.
	Port int `koanf:"port"`
	// Database holds the driver's tables and sequence. Default "": the
	// user's default (fences and table mode need one).
	Database string `koanf:"database"`
	// Username to connect as. Default "root".
	Username string `koanf:"username"`
	// Password of Username. Never logged nor put in errors. Default "".
	Password string `koanf:"password"`
	// TLS is go-sql-driver's tls parameter: "" or "false", "true",
	// "skip-verify", "preferred", or a mysql.RegisterTLSConfig name.
	TLS string `koanf:"tls"`

	// Mode is ModeAdvisory (default) or ModeTable.
	Mode string `koanf:"mode"`
	// Table is table mode's lock table ("t" or "db.t"; letters, digits, _
	// and $, up to 64 each), created if missing. Default "mutexfx_locks".
	Table string `koanf:"table"`
	// FenceTable names advisory mode's fence sequence or counter table (as
	// Table), created if missing. Default "mutexfx_fence".
	FenceTable string `koanf:"fenceTable"`
	// Fence is the advisory mode's fence source: FenceAuto (default),
	// FenceSequence, FenceCounter or FenceUUIDShort.
	Fence string `koanf:"fence"`
	// ProbeInterval is how often advisory mode checks in one round trip
	// (on a full pool: on each lock's connection) that its locks are held:
	// a KILLed connection or a restart is reported within about this.
	// Default 500ms.
	ProbeInterval time.Duration `koanf:"probeInterval"`
	// PollInterval is how often table mode checks in one query whether the
	// keys its subscribed waiters found held became free, to wake them;
	// faster near the queue's head (settings.pollEvery). Default 10ms.
	PollInterval time.Duration `koanf:"pollInterval"`
	// WaiterLiveness turns on table mode's fair hand-off (table_fair.go): a
	// free lock goes to the first live driver queued in its row, so one
	// that releases and asks again queues behind others' waiters. An entry
	// is live for WaiterLiveness after its last stamp (a small write,
	// redone after WaiterLiveness/2). Negative: off. Default 100ms.
	WaiterLiveness time.Duration `koanf:"waiterLiveness"`
	// RenewBatch is the most leases renewed by one statement in table
	// mode (and probed by one query in advisory mode). Default 1000.
	RenewBatch int `koanf:"renewBatch"`
	// Retries is how many times a table-mode statement failing with a
	// deadlock (1213), a lock wait timeout (1205) or an operator's KILL
	// QUERY (1317) is retried. Default 3; -1 for none.
	Retries int `koanf:"retries"`
	// DialTimeout bounds each connection attempt. Default 5s.
	DialTimeout time.Duration `koanf:"dialTimeout"`
	// MaxOpenConns caps the own pool, and so in advisory mode the held
	// locks and waiting Acquires, each pinning one. Default 0: no cap.
	MaxOpenConns int `koanf:"maxOpenConns"`
	// MaxIdleConns is how many idle connections the pool keeps. Default 16.
	MaxIdleConns int `koanf:"maxIdleConns"`
	// PreparedStatements sends parameters in server-side prepared
	// statements (2 round trips and a close), not interpolated (1 round
	// trip); own pool only. The advisory hot path is prepared per
	// connection regardless. Default false.
	PreparedStatements bool `koanf:"preparedStatements"`
}

var identRe = regexp.MustCompile(`^[A-Za-z0-9_$]{1,64}$`)

// quoteIdent validates and quotes a table name ("t" or "db.t"): the only
// text put in SQL, from configuration, never from lock names.
func quoteIdent(name string) (string, error) {
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return "", fmt.Errorf("invalid identifier %q: at most db.table", name)
	}
	for i, p := range parts {
		if !identRe.MatchString(p) || strings.Trim(p, "0123456789") == "" {
			return "", fmt.Errorf("invalid identifier %q: use 1 to 64 letters, digits, _ or $, not only digits", name)
		}
		parts[i] = "`" + p + "`"
	}
	return strings.Join(parts, "."), nil
}

// settings are validated Options.
type settings struct {
	mode, fence              string
	table, fenceTable        string // quoted
	floorTable, holderTable  string // quoted (table_schema.go, advisory_fence.go)
	probe, poll, dialTimeout time.Duration
	liveness                 time.Duration // 0: fair hand-off off
	batch, retries           int
	maxOpen, maxIdle         int
	prepared                 bool
}

// validate checks o and applies defaults; errors name the key.
func (o Options) validate() (settings, error) {
	s := settings{
		mode: cmp.Or(o.Mode, ModeAdvisory), fence: cmp.Or(o.Fence, FenceAuto), probe: o.ProbeInterval, poll: o.PollInterval,
		dialTimeout: o.DialTimeout, batch: o.RenewBatch, retries: o.Retries, maxOpen: o.MaxOpenConns, maxIdle: o.MaxIdleConns,
		prepared: o.PreparedStatements, liveness: o.WaiterLiveness,
	}
	if !slices.Contains([]string{ModeAdvisory, ModeTable}, s.mode) {
		return s, drivers.OptionErrorf("mode", "must be %q or %q, not %q", ModeAdvisory, ModeTable, o.Mode)
	}
	if !slices.Contains([]string{FenceAuto, FenceSequence, FenceCounter, FenceUUIDShort}, s.fence) {
		return s, drivers.OptionErrorf("fence", "must be %q, %q, %q or %q, not %q", FenceAuto, FenceSequence, FenceCounter, FenceUUIDShort, o.Fence)
	}
	table, fenceTable := cmp.Or(o.Table, DefaultTable), cmp.Or(o.FenceTable, DefaultFenceTable)
	var err error
	if s.table, err = quoteIdent(table); err != nil {
		return s, drivers.OptionErrorf("table", "%v", err)
	}
	if s.floorTable, err = quoteIdent(table + floorSuffix); err != nil {
		return s, drivers.OptionErrorf("table", "%v (the driver adds %q for its fence floor table)", err, floorSuffix)
	}
	if s.fenceTable, err = quoteIdent(fenceTable); err != nil {
		return s, drivers.OptionErrorf("fenceTable", "%v", err)
	}
	if s.holderTable, err = quoteIdent(fenceTable + holderSuffix); err != nil {
		return s, drivers.OptionErrorf("fenceTable", "%v (the driver adds %q for its holder table)", err, holderSuffix)
	}
	for _, err := range []error{
		orDefault("probeInterval", &s.probe, DefaultProbeInterval),
		orDefault("pollInterval", &s.poll, DefaultPollInterval),
		orDefault("dialTimeout", &s.dialTimeout, DefaultDialTimeout),
		orDefault("renewBatch", &s.batch, DefaultRenewBatch),
		orDefault("maxOpenConns", &s.maxOpen, 0),
		orDefault("maxIdleConns", &s.maxIdle, DefaultMaxIdleConns),
	} {
		if err != nil {
			return s, err
		}
	}
	switch {
	case s.liveness < 0:
		s.liveness = 0
	case s.liveness == 0:
		s.liveness = DefaultWaiterLiveness
	case s.liveness < time.Millisecond:
		return s, drivers.OptionErrorf("waiterLiveness", "must be at least 1ms (or negative: off)")
	}
	switch {
	case s.retries < -1:
		return s, drivers.OptionErrorf("retries", "must be -1 (none) or more")
	case s.retries == -1:
		s.retries = 0
	case s.retries == 0:
		s.retries = DefaultRetries
	}
	return s, nil
}

// mysqlConfig builds the own pool's go-sql-driver configuration; errors
// never contain the password.
func (o Options) mysqlConfig(s settings) (*gomysql.Config, error) {
	var cfg *gomysql.Config
	if o.DSN != "" {
		if key := kit.SetKey(o, "host", "port", "database", "username", "password", "tls"); key != "" {
			return nil, drivers.OptionErrorf(key, "not allowed with dsn")
		}
		var err error
		if cfg, err = parseDSN(o.DSN); err != nil { // its message may quote the password
			return nil, drivers.OptionErrorf("dsn", "%s (the DSN is not shown: it may hold a password)", dsnProblem(o.DSN, err))
		}
	} else {
		if o.Port < 0 || o.Port > 65535 {
			return nil, drivers.OptionErrorf("port", "must be 1 to 65535")
		}
		cfg = gomysql.NewConfig()
		cfg.Net = "tcp"
		cfg.Addr = net.JoinHostPort(cmp.Or(o.Host, "127.0.0.1"), strconv.Itoa(cmp.Or(o.Port, 3306)))
		cfg.User = cmp.Or(o.Username, "root")
		cfg.Passwd = o.Password
		cfg.DBName = o.Database
		if o.TLS != "" {
			cfg.TLSConfig = o.TLS
			if _, err := gomysql.NewConnector(cfg); err != nil { // a bad value is an error at its key
				msg := scrubPassword(err.Error(), "invalid", o.Password)
				if strings.HasPrefix(err.Error(), unknownTLS) {
					msg = tlsHint
				}
				return nil, drivers.OptionErrorf("tls", "%s", msg)
			}
		}
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = s.dialTimeout
	}
	cfg.InterpolateParams = !s.prepared
	cfg.ClientFoundRows = false // the statements rely on counts of changed rows
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	// Unless the DSN sets them: wait_timeout a year (an idle connection's
	// locks end with it: upkeep), and a row-lock wait of 1 s, not 50: it
	// bounds how late a statement whose call gave up can still write.
	for k, v := range map[string]string{"wait_timeout": "31536000", "innodb_lock_wait_timeout": "1"} {
		if _, ok := cfg.Params[k]; !ok {
			cfg.Params[k] = v
		}
	}
	// autocommit whatever the server or DSN say: in a transaction a
	// released row would stay locked, fences roll back
	maps.DeleteFunc(cfg.Params, func(k, _ string) bool { return strings.EqualFold(k, "autocommit") })
	cfg.Params["autocommit"] = "1"
	// the driver reports its errors; go-sql-driver's log would repeat them
	cfg.Logger = &gomysql.NopLogger{}
	return cfg, nil
}

// orDefault sets *v, key's value, to def when zero; negative is refused.
func orDefault[T int | time.Duration](key string, v *T, def T) error {
	if *v < 0 {
		return drivers.OptionErrorf(key, "must not be negative")
	}
	if *v == 0 {
		*v = def
	}
	return nil
}
