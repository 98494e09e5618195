package postgres

import (
	"cmp"
	"crypto/tls"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/redact"
)

// Modes of the driver (Options.Mode).
const (
	// ModeAdvisory keeps each lock as a session-level advisory lock on a
	// connection the driver owns. Locks end with the connection.
	ModeAdvisory = "advisory"
	// ModeTable keeps each lock as a row with an expiry computed with the
	// database's clock. Works through transaction-pooling poolers.
	ModeTable = "table"
)

// Defaults of Options.
const (
	DefaultTable          = "mutexfx_locks"
	DefaultChannel        = "mutexfx"
	DefaultMaxSessions    = 8
	DefaultMaxConns       = 8
	DefaultConnectTimeout = 5 * time.Second
	DefaultStallTimeout   = 3 * time.Second
)

// ErrOptions reports invalid Options; the error returned by New wraps it.
// It is drivers.ErrOptions.
var ErrOptions = drivers.ErrOptions

// Options configures a Driver. The zero value connects to localhost:5432 in
// advisory mode. Connection fields set next to URL override the URL's values.
type Options struct {
	// URL is a PostgreSQL URL ("postgres://user:pw@host:5432/db") or a
	// key=value DSN. Default: none; the fields below are used.
	URL string `koanf:"url"`
	// Host is the server's host name, IP address or unix socket directory.
	// Default: "localhost" (or the URL's).
	Host string `koanf:"host"`
	// Port is the server's TCP port. Default: 5432 (or the URL's).
	Port int `koanf:"port"`
	// Database is the database name. Default: the user name (PostgreSQL's).
	Database string `koanf:"database"`
	// Username is the role to connect as. Default: the OS user (libpq's).
	Username string `koanf:"username"`
	// Password is the role's password, never logged nor put in errors.
	Password string `koanf:"password"`
	// SSLMode is libpq's sslmode (disable ... verify-full), only without
	// URL (put it in the URL then). Default: "prefer".
	SSLMode string `koanf:"sslMode"`
	// TLS is the TLS configuration of every connection (code only, not
	// configuration). Default: derived from SSLMode.
	TLS *tls.Config `koanf:"-"`

	// Mode is "advisory" (default) or "table".
	Mode string `koanf:"mode"`
	// Table is the lock table (table mode), optionally schema-qualified
	// ("locks.mutex"), each part [A-Za-z_][A-Za-z0-9_]*, used quoted. The
	// fence sequence (both modes) is its name + "_fence". Default: "mutexfx_locks".
	Table string `koanf:"table"`
	// Channel is the LISTEN/NOTIFY channel for wake-ups; same rules as a
	// table name part. Default: "mutexfx".
	Channel string `koanf:"channel"`

	// Unlogged creates the lock table UNLOGGED (table mode): about 3× faster
	// writes, but a crash empties it, freeing every lock (the fence sequence
	// stays logged). Default: false.
	Unlogged bool `koanf:"unlogged"`
	// SynchronousCommit is the synchronous_commit of the driver's
	// transactions (table mode). With "off" a server crash forgets the last
	// ~0.6 s of acquisitions (a lock may be free while its holder works on)
	// and releases; fences stay increasing (docs/postgres.md). With New it
	// is a startup parameter (PgBouncer: ignore_startup_parameters), with
	// NewWithPool set per transaction. Default: "" (the server's).
	SynchronousCommit string `koanf:"synchronousCommit"`

	// MaxSessions is how many connections advisory mode pins: one takes
	// locks without waiting, the others wait in the server and then hold
	// what they got. Default: 8; 1: no server-side waits.
	MaxSessions int `koanf:"maxSessions"`
	// MaxConns is the size of the pool the driver creates for table mode.
	// Ignored with NewWithPool. Default: 8.
	MaxConns int32 `koanf:"maxConns"`
	// ConnectTimeout bounds each connection attempt. Default: 5s.
	ConnectTimeout time.Duration `koanf:"connectTimeout"`
	// StallTimeout is how long a pinned advisory connection may stay silent
	// after its statement's ctx ended and a cancel was sent before the
	// driver drops it, losing its locks. Default: 3s.
	StallTimeout time.Duration `koanf:"stallTimeout"`
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// parseIdent checks an identifier, schema-qualified if qualified.
func parseIdent(s string, qualified bool, maxLen int) (pgx.Identifier, error) {
	parts := strings.Split(s, ".")
	if len(parts) > 2 || (!qualified && len(parts) > 1) {
		return nil, fmt.Errorf("%q: too many dots", s)
	}
	for _, p := range parts {
		if !identRE.MatchString(p) {
			return nil, fmt.Errorf("%q: each part must match [A-Za-z_][A-Za-z0-9_]*", s)
		}
		if len(p) > maxLen {
			return nil, fmt.Errorf("%q: a part is longer than %d bytes", s, maxLen)
		}
	}
	return pgx.Identifier(parts), nil
}

func (o Options) withDefaults() Options {
	o.Mode, o.Table, o.Channel = cmp.Or(o.Mode, ModeAdvisory), cmp.Or(o.Table, DefaultTable), cmp.Or(o.Channel, DefaultChannel)
	o.MaxSessions, o.MaxConns = cmp.Or(o.MaxSessions, DefaultMaxSessions), cmp.Or(o.MaxConns, DefaultMaxConns)
	o.ConnectTimeout, o.StallTimeout = cmp.Or(o.ConnectTimeout, DefaultConnectTimeout), cmp.Or(o.StallTimeout, DefaultStallTimeout)
	return o
}

// names are the driver's quoted SQL identifiers (boot: bootCheck's marker).
// Only validate makes them: holding no ', they go in SQL literals.
type names struct{ table, sequence, channel, boot, wake, head, after string }

// validate checks the non-connection options and derives the names.
func (o Options) validate() (names, error) {
	var n names
	if o.Mode != ModeAdvisory && o.Mode != ModeTable {
		return n, drivers.OptionErrorf("mode", "must be %q or %q, not %q", ModeAdvisory, ModeTable, o.Mode)
	}
	// "_fence" (6 bytes) is appended to the table's last part
	table, err := parseIdent(o.Table, true, 63-6)
	if err != nil {
		return n, drivers.OptionErrorf("table", "%v", err)
	}
	ch, err := parseIdent(o.Channel, false, 63)
	if err != nil {
		return n, drivers.OptionErrorf("channel", "%v", err)
	}
	for _, c := range []struct {
		key, problem string
		bad          bool
	}{{"maxSessions", "be at least 1", o.MaxSessions < 1}, {"maxConns", "be at least 1", o.MaxConns < 1},
		{"connectTimeout", "not be negative", o.ConnectTimeout < 0}, {"stallTimeout", "not be negative", o.StallTimeout < 0}} {
		if c.bad {
			return n, drivers.OptionErrorf(c.key, "must %s", c.problem)
		}
	}
	if !slices.Contains([]string{"", "on", "off", "local", "remote_write", "remote_apply"}, o.SynchronousCommit) {
		return n, drivers.OptionErrorf("synchronousCommit", "must be on, off, local, remote_write or remote_apply, not %q", o.SynchronousCommit)
	}
	suffixed := func(s string) string {
		id := slices.Clone(table)
		id[len(id)-1] += s
		return id.Sanitize()
	}
	return names{table.Sanitize(), suffixed("_fence"), ch.Sanitize(), suffixed("_boot"), suffixed("_wake"), suffixed("_head"), suffixed("_after")}, nil
}

// poolConfig builds the connection configuration; its errors never quote the URL.
func (o Options) poolConfig() (*pgxpool.Config, error) {
	if !slices.Contains([]string{"", "disable", "allow", "prefer", "require", "verify-ca", "verify-full"}, o.SSLMode) {
		return nil, drivers.OptionErrorf("sslMode", "must be disable, allow, prefer, require, verify-ca or verify-full, not %q", o.SSLMode)
	}
	if o.Port < 0 || o.Port > 65535 {
		return nil, drivers.OptionErrorf("port", "must be 1 to 65535, not %d", o.Port)
	}
	if strings.Contains(o.Host, "@") {
		return nil, drivers.OptionErrorf("host", "must not contain @ (set the user name and password with username and password)")
	}
	conn, key := o.URL, "url"
	switch {
	case conn == "":
		conn, key = "postgres://localhost:5432?sslmode="+cmp.Or(o.SSLMode, "prefer"), "" // (validated)
	case o.SSLMode != "":
		return nil, drivers.OptionErrorf("sslMode", "not allowed with url (set sslmode in the url)")
	default:
		var err error
		if conn, _, err = checkURL(conn); err != nil {
			return nil, err
		}
	}
	cfg, err := pgxpool.ParseConfig(conn)
	if err != nil {
		return nil, parseError(err, key)
	}
	if err := checkParsed(cfg, key); err != nil {
		return nil, err
	}
	cc := cfg.ConnConfig
	cc.OnPgError = hideRefusedParams(cc.OnPgError, key, maps.Clone(cc.RuntimeParams))
	cc.Host, cc.Port = cmp.Or(o.Host, cc.Host), cmp.Or(uint16(o.Port), cc.Port)
	cc.Database, cc.User, cc.Password = cmp.Or(o.Database, cc.Database), cmp.Or(o.Username, cc.User), cmp.Or(o.Password, cc.Password)
	cc.TLSConfig = cmp.Or(o.TLS, cc.TLSConfig)
	if o.Host != "" || o.Port != 0 || o.TLS != nil {
		cc.Fallbacks = nil // the URL's fallback hosts (and their TLS settings) no longer apply
	}
	cc.ConnectTimeout = o.ConnectTimeout
	if o.Mode == ModeTable && o.SynchronousCommit != "" {
		// set once per connection, at no cost (see SynchronousCommit)
		cc.RuntimeParams["synchronous_commit"] = o.SynchronousCommit
	}
	cfg.MaxConns = o.MaxConns
	return cfg, nil
}

// plainOptions has Options' fields but not their methods: no recursion.
type plainOptions Options

// printed is the options as they print: the password as xxxxx when set,
// the URL as redactURL shows it.
func (o Options) printed() redact.Value {
	o.Password = redact.Secret(o.Password)
	if o.URL != "" {
		o.URL = redactURL(o.URL)
	}
	return redact.Value{Name: "postgres.Options", Plain: plainOptions(o)}
}

// String describes the options, secrets redacted, as %+v would.
func (o Options) String() string { return o.printed().String() }

// GoString describes the options, secrets redacted, as %#v would.
func (o Options) GoString() string { return o.printed().GoString() }

// Format prints the options as String does (GoString for %#v).
func (o Options) Format(f fmt.State, verb rune) { o.printed().Format(f, verb) }

// MarshalJSON gives the set fields by configuration key, secrets redacted,
// durations as Go duration strings, TLS as "tls": true.
func (o Options) MarshalJSON() ([]byte, error) { return o.printed().MarshalJSON() }
