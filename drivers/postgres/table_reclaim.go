package postgres

import (
	"context"
	"fmt"

	"github.com/mutexfx/mutexfx/drivers/internal/sqlkit"
)

// The table driver keeps a row per name only while it is needed: rows of
// names released or expired, that no driver queues for, are deleted by a
// goroutine of each driver that took locks, every half of the longest ttl
// it took one with (internal/reclaim), so that per-request names do not
// grow the table with traffic.
//
// Fences stay increasing across a deletion because none is kept in the
// rows: every fence is drawn from the table's one sequence (or its crash-
// guarded form), and a draw made after the release of a name's last holder
// is above that holder's fence, drawn before it held the name. Two kinds
// of draw exist. One for an existing row is made under that row's lock
// (take, refence, handover, and acquire's ON CONFLICT branch), after the
// release it follows. The other, for a row the acquire statement did not
// see, is made before its insert meets a row of the same id: had the
// row been inserted, released and deleted between that draw and the
// insert, the insert would succeed with a fence older than the deleted
// row's. So acquire draws it while holding the row's reclaim lock (a
// transaction-level advisory lock keyed by the row's id) shared, and the
// reclaim statement deletes a row only with its reclaim lock exclusive,
// taken without waiting: a draw and its insert happen either wholly before
// a deletion commits (the insert then meets the row and takes the ON
// CONFLICT branch) or wholly after it (the draw is then after the deleted
// holder's release). The reclaimer never waits for an acquisition (one
// waiting for a row lock would otherwise queue every other behind it).

// reclaimBatch is the most rows one reclaim statement deletes.
const reclaimBatch = 256

// reclaimClass is the first key of a row's reclaim lock, the first four
// bytes of its id the second (the two-key form: objsubid 2 in pg_locks,
// apart from advisory mode's one-key locks).
const reclaimClass = 0x6d757478 // "mutx"

// reclaimLockSQL is the expression taking the reclaim lock of the row whose
// id is the expression id for the transaction, with fn
// "pg_advisory_xact_lock_shared" (acquire) or "pg_try_advisory_xact_lock"
// (the reclaimer, which never waits: a row whose lock it cannot have now is
// left for its next round).
func reclaimLockSQL(fn, id string) string {
	return fmt.Sprintf("%s(%d, ('x' || encode(substring(%s FROM 1 FOR 4), 'hex'))::bit(32)::int)", fn, reclaimClass, id)
}

// reclaimRows deletes the reclaimable rows, reclaimBatch per statement,
// until a statement deletes fewer or ctx ends; it returns how many.
func (d *tableDriver) reclaimRows(ctx context.Context) (int64, error) {
	return sqlkit.Drain(ctx, reclaimBatch, func(ctx context.Context) (n int64, err error) {
		err = d.run(ctx, func(ctx context.Context, p querier) error {
			tag, err := p.Exec(ctx, d.sql.reclaim, reclaimBatch)
			n = tag.RowsAffected()
			return err
		})
		return n, err
	})
}
