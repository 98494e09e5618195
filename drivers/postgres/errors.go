package postgres

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/sqlkit"
	"github.com/mutexfx/mutexfx/internal/backoff"
)

func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// permanent marks err drivers.Permanent when retrying cannot cure its
// SQLSTATE: credentials or role refused (28P01, 28000), a privilege
// missing (42501), no such database (3D000).
func permanent(err error) error {
	if slices.Contains([]string{"28P01", "28000", "42501", "3D000"}, sqlState(err)) {
		return drivers.Permanent(err)
	}
	return err
}

// retry runs f until it succeeds or fails for good, pausing 1 ms doubling to
// 32 ms. Conflicts (serialization failure, deadlock, lock timeout) are
// retried for up to 5 s; five times, failures before the statement could run
// (nothing sent, or the backend terminated: a pool hands out connections
// whose backend ended) and a statement cancelledByOthers.
func retry(ctx context.Context, f func() error) error {
	until := time.Now().Add(5 * time.Second)
	return sqlkit.Retry(ctx, backoff.Policy{Start: time.Millisecond, Cap: 32 * time.Millisecond}, f, func(attempt int, err error) bool {
		if slices.Contains([]string{"40001", "40P01", "55P03"}, sqlState(err)) {
			return !time.Now().After(until)
		}
		return attempt < 5 && (pgconn.SafeToRetry(err) || cancelledByOthers(ctx, err) ||
			slices.Contains([]string{"57P01", "57P02", "57P03"}, sqlState(err)))
	})
}

// cancelledByOthers reports a statement cancelled (57014) while ctx lives:
// by a lock timeout firing as its wait was granted, or an operator. It was
// rolled back: it can run again.
func cancelledByOthers(ctx context.Context, err error) bool {
	return sqlState(err) == "57014" && ctx.Err() == nil
}
