package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/mysql"
)

// row is one measured operation, with instances on separate connections.
type row struct {
	name string
	base string // the row it is compared with, "" for none
	goal float64
	// ops are the operation on each of instances connections (or drivers,
	// or components): each round runs one of them, at random. The same
	// statements answer at different medians on different connections
	// (MariaDB runs a thread per connection: measured here, p50 44–93 µs
	// across 8 connections for one bare GET_LOCK+RELEASE_LOCK pair, p10
	// 39–40 µs on all), so a row measured on one connection would draw
	// its median from that lottery.
	ops []func(ctx context.Context) error
	ds  []time.Duration
}

// instances is how many connections (drivers, components) each row runs
// on.
const instances = 4

// each returns instances operations made by mk(i).
func each(mk func(i int) func(context.Context) error) []func(context.Context) error {
	ops := make([]func(context.Context) error, instances)
	for i := range ops {
		ops[i] = mk(i)
	}
	return ops
}

// openDB opens a pool on the DSN, with client-side interpolation or not.
func openDB(interpolate bool) (*sql.DB, error) {
	cfg, err := gomysql.ParseDSN(*dsn)
	if err != nil {
		return nil, fmt.Errorf("dsn: %v", err)
	}
	cfg.InterpolateParams = interpolate
	c, err := gomysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(c), nil
}

func server() string {
	db, err := openDB(true)
	if err != nil {
		return "?"
	}
	defer db.Close()
	var v, flush string
	_ = db.QueryRow("SELECT VERSION(), @@innodb_flush_log_at_trx_commit").Scan(&v, &flush)
	return fmt.Sprintf("server %s, innodb_flush_log_at_trx_commit=%s", v, flush)
}

func latencies() ([]*row, error) {
	ctx := context.Background()
	text, err := openDB(true)
	if err != nil {
		return nil, err
	}
	defer text.Close()
	prep, err := openDB(false)
	if err != nil {
		return nil, err
	}
	defer prep.Close()
	// Each bare row has a pinned connection of its own, used by nothing
	// else: a connection another row has just used is answered faster (the
	// server's thread for it is still running), which would favour it.
	var conns []*sql.Conn
	var closers []func() // components first, then drivers: in reverse order
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
		for _, c := range conns {
			c.Close()
		}
	}()
	own := func(db *sql.DB) (*sql.Conn, error) {
		c, err := db.Conn(ctx)
		if err == nil {
			conns = append(conns, c)
		}
		return c, err
	}
	var tcs [8][instances]*sql.Conn
	var pcs, kps [instances]*sql.Conn
	for i := range instances {
		for j := range tcs {
			if tcs[j][i], err = own(text); err != nil {
				return nil, err
			}
		}
		if pcs[i], err = own(prep); err != nil {
			return nil, err
		}
		if kps[i], err = own(prep); err != nil {
			return nil, err
		}
	}

	const bareTable = "mutexfx_bench_bare"
	if _, err := text.Exec(`CREATE TABLE IF NOT EXISTS ` + bareTable + ` (name_hash BINARY(32) NOT NULL PRIMARY KEY,
 token VARBINARY(255) NOT NULL, fence BIGINT UNSIGNED NOT NULL, expires_at DATETIME(6) NOT NULL, name MEDIUMBLOB NOT NULL) ENGINE=InnoDB`); err != nil {
		return nil, err
	}
	// drivers and components, instances of each, each row on its own: a
	// connection two rows share is used twice as often, and answered
	// faster (measured here: 8–20 µs of a pair), which would favour them
	var adv, advBg, advU, tab [instances]mysql.Driver
	var advM, tabM [instances]*component.Mutex
	newDriver := func(o mysql.Options) (mysql.Driver, error) {
		o.DSN = *dsn
		d, err := mysql.New(o)
		if err == nil {
			closers = append(closers, func() { d.Close(ctx) })
		}
		return d, err
	}
	newMutex := func(o mysql.Options) (*component.Mutex, error) {
		d, err := newDriver(o)
		if err != nil {
			return nil, err
		}
		m, err := component.New(component.Options{Driver: d, Prefix: "bench:"})
		if err == nil {
			closers = append(closers, func() { m.Close(ctx) })
		}
		return m, err
	}
	for i := range instances {
		if adv[i], err = newDriver(mysql.Options{}); err != nil {
			return nil, err
		}
		if advBg[i], err = newDriver(mysql.Options{}); err != nil {
			return nil, err
		}
		if advU[i], err = newDriver(mysql.Options{Fence: mysql.FenceUUIDShort}); err != nil {
			return nil, err
		}
		if tab[i], err = newDriver(mysql.Options{Mode: mysql.ModeTable, Table: "mutexfx_bench_locks"}); err != nil {
			return nil, err
		}
		if advM[i], err = newMutex(mysql.Options{}); err != nil {
			return nil, err
		}
		if tabM[i], err = newMutex(mysql.Options{Mode: mysql.ModeTable, Table: "mutexfx_bench_locks"}); err != nil {
			return nil, err
		}
	}

	id := rand.Text()[:8]
	key := "bench:" + id
	h := sha256.Sum256([]byte(key))
	pair := func(c *sql.Conn, acquire, release string, args ...any) func(context.Context) error {
		// the acquire statement's extra columns, if any, are read too
		var r, extra1, extra2 sql.NullInt64
		dest := []any{&r}
		if strings.Contains(acquire, "CONNECTION_ID()") {
			dest = append(dest, &extra1, &extra2)
		}
		return func(ctx context.Context) error {
			if err := c.QueryRowContext(ctx, acquire, args...).Scan(dest...); err != nil {
				return err
			}
			if r.Int64 == 0 {
				return fmt.Errorf("bare GET_LOCK = %v", r)
			}
			return c.QueryRowContext(ctx, release, args...).Scan(&r)
		}
	}
	driverPair := func(d drivers.Driver, name string) func(context.Context) error {
		return func(ctx context.Context) error {
			tok := rand.Text()
			res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: name, Token: tok, TTL: 30 * time.Second})
			if err != nil || !res.Acquired {
				return fmt.Errorf("acquire %+v %v", res, err)
			}
			ok, err := d.Release(ctx, name, tok)
			if err != nil || !ok {
				return fmt.Errorf("release %v %v", ok, err)
			}
			return nil
		}
	}
	componentPair := func(m *component.Mutex, name string) func(context.Context) error {
		return func(ctx context.Context) error {
			l, err := m.TryAcquire(ctx, name)
			if err != nil {
				return err
			}
			_, err = l.Release(ctx)
			return err
		}
	}
	// The mutexfx rows are given a cancellable ctx, as a request's: the
	// component passes its driver one (the attempt's) whatever its
	// caller's, and a driver row given context.Background() would skip
	// what the component's driver does (end a statement with the ctx:
	// measured here, 2–8 µs of a pair).
	cancellable := func(o func(context.Context) error) func(context.Context) error {
		return func(ctx context.Context) error {
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			return o(ctx)
		}
	}
	// The drivers create their schema (the fence sequence the bare NEXTVAL
	// row uses too) at first use: before the
	// statements kept prepared below are prepared.
	for _, d := range []drivers.Driver{adv[0], tab[0]} {
		if err := driverPair(d, key+":schema")(ctx); err != nil {
			return nil, fmt.Errorf("schema: %w", err)
		}
	}
	upsert := `INSERT INTO ` + bareTable + ` (name_hash, token, fence, expires_at, name) VALUES (?, ?, 1, NOW(6) + INTERVAL 30 SECOND, ?)
ON DUPLICATE KEY UPDATE token = IF(expires_at < NOW(6), VALUES(token), token), expires_at = IF(expires_at < NOW(6), VALUES(expires_at), expires_at)`
	type op = func(context.Context) error
	rows := []*row{
		{name: "SELECT 1 (text protocol)", ops: each(func(i int) op {
			return func(ctx context.Context) error {
				var one int
				return tcs[0][i].QueryRowContext(ctx, "SELECT 1").Scan(&one)
			}
		})},
		{name: "bare GET_LOCK+RELEASE_LOCK, text", base: "SELECT 1 (text protocol)", ops: each(func(i int) op {
			return pair(tcs[1][i], "SELECT GET_LOCK('mutexfx_bench_"+id+"', 0)", "SELECT RELEASE_LOCK('mutexfx_bench_"+id+"')")
		})},
		{name: "bare GET_LOCK+RELEASE_LOCK, prepared args", base: "bare GET_LOCK+RELEASE_LOCK, text", ops: each(func(i int) op {
			return pair(pcs[i], "SELECT GET_LOCK(?, 0)", "SELECT RELEASE_LOCK(?)", "mutexfx_bench_p_"+id)
		})},
		{name: "bare GET_LOCK+RELEASE_LOCK, interpolated args", base: "bare GET_LOCK+RELEASE_LOCK, text", ops: each(func(i int) op {
			return pair(tcs[2][i], "SELECT GET_LOCK(?, 0)", "SELECT RELEASE_LOCK(?)", "mutexfx_bench_i_"+id)
		})},
		{name: "bare pair + NEXTVAL: SELECT CASE GET_LOCK('x',0) WHEN 1 THEN NEXTVAL(mutexfx_fence) … END", base: "bare GET_LOCK+RELEASE_LOCK, text", ops: each(func(i int) op {
			return pair(tcs[3][i], "SELECT CASE GET_LOCK('mutexfx_bench_n_"+id+"', 0) WHEN 1 THEN NEXTVAL(mutexfx_fence) WHEN 0 THEN 0 END", "SELECT RELEASE_LOCK('mutexfx_bench_n_"+id+"')")
		})},
		{name: "bare pair + UUID_SHORT(), same shape", base: "bare GET_LOCK+RELEASE_LOCK, text", ops: each(func(i int) op {
			return pair(tcs[4][i], "SELECT CASE GET_LOCK('mutexfx_bench_u_"+id+"', 0) WHEN 1 THEN UUID_SHORT() WHEN 0 THEN 0 END", "SELECT RELEASE_LOCK('mutexfx_bench_u_"+id+"')")
		})},
		{name: "mutexfx advisory driver acquire+release (fence: sequence, default)", base: "bare GET_LOCK+RELEASE_LOCK, text", goal: 1.2,
			ops: each(func(i int) op { return cancellable(driverPair(adv[i], key+":adv")) })},
		{name: "the same with context.Background() (nothing to end a statement)", base: "bare GET_LOCK+RELEASE_LOCK, text",
			ops: each(func(i int) op { return driverPair(advBg[i], key+":advbg") })},
		{name: "mutexfx advisory driver, fence: uuid_short", base: "bare GET_LOCK+RELEASE_LOCK, text", goal: 1.2,
			ops: each(func(i int) op { return cancellable(driverPair(advU[i], key+":advu")) })},
		{name: "its statements as it sends them on its own pool: kept prepared statements (" + driverAcquire + "; " + driverRelease + ")", base: "bare GET_LOCK+RELEASE_LOCK, text", ops: each(func(i int) op {
			return keptPair(ctx, kps[i], lockNameOf(key+":kept"))
		})},
		{name: "the same as text, arguments interpolated (as with NewWithDB)", base: "bare GET_LOCK+RELEASE_LOCK, text", ops: each(func(i int) op {
			return pair(tcs[5][i], driverAcquire, driverRelease, lockNameOf(key+":sql"))
		})},
		{name: "the same as text, also reading the session (CONNECTION_ID(), UNIX_TIMESTAMP()) in the acquire", base: "bare GET_LOCK+RELEASE_LOCK, text", ops: each(func(i int) op {
			return pair(tcs[6][i], driverAcquire+", CONNECTION_ID(), UNIX_TIMESTAMP()", driverRelease, lockNameOf(key+":sqlsess"))
		})},
		{name: "mutexfx advisory component TryAcquire+Release", base: "bare GET_LOCK+RELEASE_LOCK, text", goal: 1.2,
			ops: each(func(i int) op { return cancellable(componentPair(advM[i], id+":advc")) })},
		{name: "bare upsert-if-expired + DELETE", base: "SELECT 1 (text protocol)", ops: each(func(i int) op {
			return func(ctx context.Context) error {
				tok := rand.Text()
				if _, err := tcs[7][i].ExecContext(ctx, upsert, h[:], tok, key); err != nil {
					return err
				}
				_, err := tcs[7][i].ExecContext(ctx, `DELETE FROM `+bareTable+` WHERE name_hash = ? AND token = ?`, h[:], tok)
				return err
			}
		})},
		{name: "mutexfx table driver acquire+release", base: "bare upsert-if-expired + DELETE", goal: 1.2,
			ops: each(func(i int) op { return cancellable(driverPair(tab[i], key+":tab")) })},
		{name: "mutexfx table component TryAcquire+Release", base: "bare upsert-if-expired + DELETE", goal: 1.2,
			ops: each(func(i int) op { return cancellable(componentPair(tabM[i], id+":tabc")) })},
	}
	for _, r := range rows { // warm up: schema, pools, statements
		for _, o := range r.ops {
			for range 5 {
				if err := o(ctx); err != nil {
					return nil, fmt.Errorf("%s: %w", r.name, err)
				}
			}
		}
	}
	// Each round runs the rows in a new random order: a row's cost depends
	// on what ran just before it (a commit's fsync, another connection),
	// and a fixed order would favour some rows over others.
	for range *n {
		for _, i := range mrand.Perm(len(rows)) {
			r := rows[i]
			o := r.ops[mrand.IntN(len(r.ops))]
			start := time.Now()
			if err := o(ctx); err != nil {
				return nil, fmt.Errorf("%s: %w", r.name, err)
			}
			r.ds = append(r.ds, time.Since(start))
		}
	}
	return rows, nil
}

// The advisory driver's statements (drivers/mysql: advSequenceSQL without
// a timeout, on a connection whose session it knows, and its release).
// On its own pool it keeps them prepared per connection (prepared.go).
const (
	driverAcquire = "SELECT CASE GET_LOCK(?, 0) WHEN 1 THEN NEXTVAL(mutexfx_fence) WHEN 0 THEN 0 END"
	driverRelease = "SELECT RELEASE_LOCK(?)"
)

// keptPair is an acquire+release of name with the driver's statements kept
// prepared on c (prepared once, here).
func keptPair(ctx context.Context, c *sql.Conn, name string) func(context.Context) error {
	a, errA := c.PrepareContext(ctx, driverAcquire)
	r, errR := c.PrepareContext(ctx, driverRelease)
	return func(ctx context.Context) error {
		if err := cmp.Or(errA, errR); err != nil {
			return err
		}
		var v sql.NullInt64
		if err := a.QueryRowContext(ctx, name).Scan(&v); err != nil {
			return err
		}
		if v.Int64 == 0 {
			return fmt.Errorf("GET_LOCK = %v", v)
		}
		return r.QueryRowContext(ctx, name).Scan(&v)
	}
}

// lockNameOf is the driver's GET_LOCK name of a key (its doc's formula).
func lockNameOf(key string) string {
	h := sha256.Sum256([]byte(key))
	return "mutexfx:" + hex.EncodeToString(h[:24])
}

func printLatencies(rows []*row) {
	p50, p10 := map[string]time.Duration{}, map[string]time.Duration{}
	fmt.Printf("Each row runs on %d connections (drivers, components), one chosen at random each round; p10 is the fast mode of this machine's bimodal round trips.\n\n", instances)
	fmt.Println("| operation (one round = acquire+release) | p50 | p99 | p10 | ratio of p50 | ratio of p10 | goal (p50) |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, r := range rows {
		m, p99, f := pct(r.ds, 50), pct(r.ds, 99), pct(r.ds, 10)
		p50[r.name], p10[r.name] = m, f
		ratio, fast, goal := "", "", ""
		if r.base != "" {
			ratio = fmt.Sprintf("%.2f × %s", float64(m)/float64(p50[r.base]), r.base)
			fast = fmt.Sprintf("%.2f ×", float64(f)/float64(p10[r.base]))
		}
		if r.goal > 0 {
			verdict := "met"
			if float64(m) > r.goal*float64(p50[r.base]) {
				verdict = "NOT met"
			}
			goal = fmt.Sprintf("≤ %.1f ×: %s", r.goal, verdict)
		}
		fmt.Printf("| %s | %s | %s | %s | %s | %s | %s |\n", r.name, us(m), us(p99), us(f), ratio, fast, goal)
	}
}
