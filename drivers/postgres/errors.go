package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/backoff"
)

// sqlState returns err's SQLSTATE, or "".
func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// permanentCodes are the SQLSTATEs that retrying cannot cure: the server
// refused the credentials or the role, the role lacks a privilege (CONNECT
// on the database, USAGE or CREATE on the schema, rights on the table), or
// the database does not exist. Fail-overs, restarts, a full connection
// table and timeouts (57P01, 57P03, 53300, 08xxx, 40001, 55P03) are not
// among them.
var permanentCodes = map[string]bool{
	"28P01": true, // invalid_password
	"28000": true, // invalid_authorization_specification (pg_hba.conf rejects)
	"42501": true, // insufficient_privilege
	"3D000": true, // invalid_catalog_name: no such database
}

// permanent returns err marked drivers.Permanent when the server answered
// with one of permanentCodes, else err unchanged.
func permanent(err error) error {
	if err == nil || errors.Is(err, drivers.ErrPermanent) || !permanentCodes[sqlState(err)] {
		return err
	}
	return drivers.Permanent(err)
}

// retryable reports serialization failures, deadlocks, lock timeouts, and failures that
// happened before the statement could run: nothing sent yet, or the backend
// terminated (admin shutdown, crash recovery, starting up) — a pool hands
// out idle connections whose backend was terminated meanwhile.
func retryable(err error) bool {
	switch sqlState(err) {
	case "40001", "40P01", "55P03", "57P01", "57P02", "57P03":
		return true
	}
	return pgconn.SafeToRetry(err)
}

// retry runs f until it succeeds or fails for good. A serialization
// failure, a deadlock or a lock timeout (contended statements fail so
// when a server or role sets the default isolation to serializable or
// repeatable read, or a short lock_timeout) is retried for up to
// conflictBudget, other retryable failures five times,
// with short growing pauses (retryPolicy), jittered so that the conflicting callers do
// not meet again. A statement cancelled while ctx lives (cancelledByOthers)
// counts among the other failures.
func retry(ctx context.Context, f func() error) error {
	b := retryPolicy.New()
	until := time.Now().Add(conflictBudget)
	for attempt := 1; ; attempt++ {
		err := f()
		if err == nil || !retryable(err) && !cancelledByOthers(ctx, err) {
			return err
		}
		if s := sqlState(err); s == "40001" || s == "40P01" || s == "55P03" {
			if time.Now().After(until) {
				return err
			}
		} else if attempt == 5 {
			return err
		}
		if !backoff.Sleep(ctx, b.Next()) {
			return ctx.Err()
		}
	}
}

// retryPolicy spaces retry's attempts: 1 ms doubling to 32 ms, short
// beside a statement's own round trip under contention.
var retryPolicy = backoff.Policy{Start: time.Millisecond, Cap: 32 * time.Millisecond}

// cancelledByOthers reports a statement the server cancelled (57014,
// "canceling statement due to user request") although ctx, the call's, has
// not ended: the cancel was not this driver's. PostgreSQL reports so a lock
// timeout that fired as its wait was granted, when the same statement then
// waits for a second lock (the second wait clears the flag that names the
// timeout); an operator's pg_cancel_backend looks the same. The statement
// was rolled back, so it can run again.
func cancelledByOthers(ctx context.Context, err error) bool {
	return sqlState(err) == "57014" && ctx.Err() == nil
}

// conflictBudget is how long retry retries serialization failures,
// deadlocks and lock timeouts (within the call's ctx).
const conflictBudget = 5 * time.Second
