package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/mysql"
)

// row is one measured operation.
type row struct {
	name string
	base string // the row it is compared with, "" for none
	goal float64
	op   func(ctx context.Context) error
	ds   []time.Duration
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
	defer func() {
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
	var tcs [8]*sql.Conn
	for i := range tcs {
		if tcs[i], err = own(text); err != nil {
			return nil, err
		}
	}
	pc, err := own(prep)
	if err != nil {
		return nil, err
	}

	const bareTable = "mutexfx_bench_bare"
	if _, err := text.Exec(`CREATE TABLE IF NOT EXISTS ` + bareTable + ` (name_hash BINARY(32) NOT NULL PRIMARY KEY,
 token VARBINARY(255) NOT NULL, fence BIGINT UNSIGNED NOT NULL, expires_at DATETIME(6) NOT NULL, name MEDIUMBLOB NOT NULL) ENGINE=InnoDB`); err != nil {
		return nil, err
	}
	adv, err := mysql.New(mysql.Options{DSN: *dsn})
	if err != nil {
		return nil, err
	}
	defer adv.Close(ctx)
	advU, err := mysql.New(mysql.Options{DSN: *dsn, Fence: mysql.FenceUUIDShort})
	if err != nil {
		return nil, err
	}
	defer advU.Close(ctx)
	tab, err := mysql.New(mysql.Options{DSN: *dsn, Mode: mysql.ModeTable, Table: "mutexfx_bench_locks"})
	if err != nil {
		return nil, err
	}
	defer tab.Close(ctx)
	advM, err := component.New(component.Options{Driver: adv, Prefix: "bench:"})
	if err != nil {
		return nil, err
	}
	defer advM.Close(ctx)
	tabM, err := component.New(component.Options{Driver: tab, Prefix: "bench:"})
	if err != nil {
		return nil, err
	}
	defer tabM.Close(ctx)

	id := rand.Text()[:8]
	key := "bench:" + id
	h := sha256.Sum256([]byte(key))
	pair := func(c *sql.Conn, acquire, release string, args ...any) func(context.Context) error {
		return func(ctx context.Context) error {
			var r sql.NullInt64
			if err := c.QueryRowContext(ctx, acquire, args...).Scan(&r); err != nil {
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
	upsert := `INSERT INTO ` + bareTable + ` (name_hash, token, fence, expires_at, name) VALUES (?, ?, 1, NOW(6) + INTERVAL 30 SECOND, ?)
ON DUPLICATE KEY UPDATE token = IF(expires_at < NOW(6), VALUES(token), token), expires_at = IF(expires_at < NOW(6), VALUES(expires_at), expires_at)`
	rows := []*row{
		{name: "SELECT 1 (text protocol)", op: func(ctx context.Context) error {
			var one int
			return tcs[0].QueryRowContext(ctx, "SELECT 1").Scan(&one)
		}},
		{name: "bare GET_LOCK+RELEASE_LOCK, text", base: "SELECT 1 (text protocol)",
			op: pair(tcs[1], "SELECT GET_LOCK('mutexfx_bench_"+id+"', 0)", "SELECT RELEASE_LOCK('mutexfx_bench_"+id+"')")},
		{name: "bare GET_LOCK+RELEASE_LOCK, prepared args", base: "bare GET_LOCK+RELEASE_LOCK, text",
			op: pair(pc, "SELECT GET_LOCK(?, 0)", "SELECT RELEASE_LOCK(?)", "mutexfx_bench_p_"+id)},
		{name: "bare GET_LOCK+RELEASE_LOCK, interpolated args", base: "bare GET_LOCK+RELEASE_LOCK, text",
			op: pair(tcs[2], "SELECT GET_LOCK(?, 0)", "SELECT RELEASE_LOCK(?)", "mutexfx_bench_i_"+id)},
		{name: "bare pair + NEXTVAL: SELECT CASE GET_LOCK('x',0) WHEN 1 THEN NEXTVAL(mutexfx_fence) … END", base: "bare GET_LOCK+RELEASE_LOCK, text",
			op: pair(tcs[3], "SELECT CASE GET_LOCK('mutexfx_bench_n_"+id+"', 0) WHEN 1 THEN NEXTVAL(mutexfx_fence) WHEN 0 THEN 0 END", "SELECT RELEASE_LOCK('mutexfx_bench_n_"+id+"')")},
		{name: "bare pair + UUID_SHORT(), same shape", base: "bare GET_LOCK+RELEASE_LOCK, text",
			op: pair(tcs[4], "SELECT CASE GET_LOCK('mutexfx_bench_u_"+id+"', 0) WHEN 1 THEN UUID_SHORT() WHEN 0 THEN 0 END", "SELECT RELEASE_LOCK('mutexfx_bench_u_"+id+"')")},
		{name: "mutexfx advisory driver acquire+release (fence: sequence, default)", base: "bare GET_LOCK+RELEASE_LOCK, text", goal: 1.2,
			op: driverPair(adv, key+":adv")},
		{name: "the same with a cancellable ctx (as callers pass)", base: "bare GET_LOCK+RELEASE_LOCK, text",
			op: func(ctx context.Context) error {
				cctx, cancel := context.WithCancel(ctx)
				defer cancel()
				return driverPair(adv, key+":advctx")(cctx)
			}},
		{name: "mutexfx advisory driver, fence: uuid_short", base: "bare GET_LOCK+RELEASE_LOCK, text", goal: 1.2,
			op: driverPair(advU, key+":advu")},
		{name: "its SQL on a pinned conn (sequence fence, GET_LOCK(?, 0))", base: "bare GET_LOCK+RELEASE_LOCK, text",
			op: pair(tcs[5], "SELECT CASE GET_LOCK(?, 0) WHEN 1 THEN NEXTVAL(mutexfx_fence) WHEN 0 THEN 0 END", "SELECT RELEASE_LOCK(?)", lockNameOf(key+":sql"))},
		{name: "same, earlier shape GET_LOCK(?, ? / 1000)", base: "bare GET_LOCK+RELEASE_LOCK, text",
			op: pair(tcs[6], "SELECT CASE GET_LOCK(?, 0 / 1000) WHEN 1 THEN NEXTVAL(mutexfx_fence) WHEN 0 THEN 0 END", "SELECT RELEASE_LOCK(?)", lockNameOf(key+":sql0"))},
		{name: "mutexfx advisory component TryAcquire+Release", base: "bare GET_LOCK+RELEASE_LOCK, text",
			op: componentPair(advM, id+":advc")},
		{name: "bare upsert-if-expired + DELETE", base: "SELECT 1 (text protocol)", op: func(ctx context.Context) error {
			tok := rand.Text()
			if _, err := tcs[7].ExecContext(ctx, upsert, h[:], tok, key); err != nil {
				return err
			}
			_, err := tcs[7].ExecContext(ctx, `DELETE FROM `+bareTable+` WHERE name_hash = ? AND token = ?`, h[:], tok)
			return err
		}},
		{name: "mutexfx table driver acquire+release", base: "bare upsert-if-expired + DELETE", goal: 1.2,
			op: driverPair(tab, key+":tab")},
		{name: "mutexfx table component TryAcquire+Release", base: "bare upsert-if-expired + DELETE",
			op: componentPair(tabM, id+":tabc")},
	}
	// The drivers create their schema (the fence sequence the bare NEXTVAL
	// row uses too) at first use.
	for _, d := range []drivers.Driver{adv, tab} {
		if err := driverPair(d, key+":schema")(ctx); err != nil {
			return nil, fmt.Errorf("schema: %w", err)
		}
	}
	for _, r := range rows { // warm up: schema, pools, statements
		for range 20 {
			if err := r.op(ctx); err != nil {
				return nil, fmt.Errorf("%s: %w", r.name, err)
			}
		}
	}
	// Each round runs the rows in a new random order: a row's cost depends
	// on what ran just before it (a commit's fsync, another connection),
	// and a fixed order would favour some rows over others.
	for range *n {
		for _, i := range mrand.Perm(len(rows)) {
			r := rows[i]
			start := time.Now()
			if err := r.op(ctx); err != nil {
				return nil, fmt.Errorf("%s: %w", r.name, err)
			}
			r.ds = append(r.ds, time.Since(start))
		}
	}
	return rows, nil
}

// lockNameOf is the driver's GET_LOCK name of a key (its doc's formula).
func lockNameOf(key string) string {
	h := sha256.Sum256([]byte(key))
	return "mutexfx:" + hex.EncodeToString(h[:24])
}

func printLatencies(rows []*row) {
	p50 := map[string]time.Duration{}
	fmt.Println("| operation (one round = acquire+release) | p50 | p99 | ratio of p50 | goal |")
	fmt.Println("|---|---|---|---|---|")
	for _, r := range rows {
		m, p99 := pct(r.ds, 50), pct(r.ds, 99)
		p50[r.name] = m
		ratio, goal := "", ""
		if r.base != "" {
			ratio = fmt.Sprintf("%.2f × %s", float64(m)/float64(p50[r.base]), r.base)
		}
		if r.goal > 0 {
			verdict := "met"
			if float64(m) > r.goal*float64(p50[r.base]) {
				verdict = "NOT met"
			}
			goal = fmt.Sprintf("≤ %.1f ×: %s", r.goal, verdict)
		}
		fmt.Printf("| %s | %s | %s | %s | %s |\n", r.name, us(m), us(p99), ratio, goal)
	}
}
