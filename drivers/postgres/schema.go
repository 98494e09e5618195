package postgres

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
)

// schemaObject is an object of the driver's schema: present is a SQL
// boolean telling whether it is in place, create the statements that put
// it in place.
type schemaObject struct {
	present string
	create  []string
}

// regclass is the SQL expression resolving the quoted, validated name.
func regclass(name string) string {
	return "to_regclass('" + strings.ReplaceAll(name, "'", "''") + "')" // (never holds a ': validated)
}

// baseSchema is what both drivers need: the fence sequence and the boot
// marker (boot.go), whose row is inserted with the table: a missing row
// means the server recovered from a crash since.
func baseSchema(n names) []schemaObject {
	return []schemaObject{
		{regclass(n.sequence) + " IS NOT NULL", []string{"CREATE SEQUENCE IF NOT EXISTS " + n.sequence}},
		{regclass(n.boot) + " IS NOT NULL", []string{
			"CREATE UNLOGGED TABLE IF NOT EXISTS " + n.boot + " (id boolean PRIMARY KEY)",
			"INSERT INTO " + n.boot + " VALUES (true) ON CONFLICT DO NOTHING",
		}},
	}
}

// ensureSchema creates the objects of b.schema that are missing, once per
// driver, serialised between drivers by a transaction-level advisory lock.
// It creates only what is missing: a role may use the objects without the
// right to create them.
func (b *base) ensureSchema(ctx context.Context, begin func(context.Context) (pgx.Tx, error)) error {
	return b.ddl.Ensure(ctx, func(ctx context.Context) error {
		tx, err := begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		// the DDL waits for the other drivers' (and for the tables' locks): a
		// role's lock_timeout or statement_timeout must not fail it, ctx bounds it
		if _, err := tx.Exec(ctx, "SELECT set_config('lock_timeout', '0', true), set_config('statement_timeout', '0', true)"); err != nil {
			return err
		}
		// the commit is synchronous whatever the session's setting: a sequence
		// created in a commit a crash forgets would start again at 1
		q := "SELECT pg_advisory_xact_lock($1), set_config('synchronous_commit', 'on', true)"
		present := make([]bool, len(b.schema))
		dest := []any{nil, nil}
		for i, o := range b.schema {
			q += ", " + o.present
			dest = append(dest, &present[i])
		}
		if err := tx.QueryRow(ctx, q, ddlLockKey).Scan(dest...); err != nil {
			return err
		}
		for i, o := range b.schema {
			if present[i] {
				continue
			}
			for _, s := range o.create {
				if _, err := tx.Exec(ctx, s); err != nil {
					return err
				}
			}
		}
		return tx.Commit(ctx)
	})
}

// ddlLockKey serialises the drivers' CREATE statements (any constant works:
// a collision only makes two DDL transactions wait for each other).
const ddlLockKey int64 = 0x6d75746578667800 // "mutexfx\x00"
