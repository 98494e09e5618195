package postgres

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/sqlkit"
)

var _ drivers.Lister = (*tableDriver)(nil) // a capability of table mode only

// ErrTTL is returned for a table mode ttl below one millisecond.
var ErrTTL = errors.New("postgres: ttl must be at least 1ms")

// maxRenewBatch is the largest number of leases renewed by one statement.
const maxRenewBatch = 10000

// tableDriver keeps each lock as a row with an expiry in the server's
// clock (ModeTable), its waiters queued in the row and woken by NOTIFY.
type tableDriver struct {
	*base
	sql tableStatements
	id  string // this driver's id in the rows' waiter queues

	poolCfg *pgxpool.Config // the owned pool's; nil with NewWithPool
	poolMu  sync.Mutex      // creates and closes the pool
	pool    atomic.Pointer[pgxpool.Pool]

	reclaim sqlkit.Reclaimer // deletes the rows no longer needed
	grants  grants           // the waiting calls a release may grant a lock
}

func newTable(b *base, cfg *pgxpool.Config, pool *pgxpool.Pool) *tableDriver {
	d := &tableDriver{base: b, sql: tableSQL(b.names, b.opts, pool != nil), id: rand.Text(), poolCfg: cfg,
		grants: grants{calls: map[string]chan uint64{}}}
	d.pool.Store(pool)
	d.reclaim.Batch, d.reclaim.Round = reclaimBatch, d.reclaimRound
	b.schema = append(b.schema, tableSchema(b.names, b.opts)...)
	b.channels = append(b.channels, pgx.Identifier{ownChannel(d.id)}.Sanitize(), pgx.Identifier{grantChannel(d.id)}.Sanitize())
	b.granted = map[string]func(string){grantChannel(d.id): d.grants.deliver}
	return d
}

// Features reports expiring, fenced locks with waits queued in the row.
func (d *tableDriver) Features() drivers.Features {
	return drivers.Features{Expiring: true, ServerTime: true, Fencing: true, BlockingWait: true, Scope: "server", MinTTL: 500 * time.Millisecond}
}

// Acquire takes the lock in one statement; with req.Wait it waits for its
// turn. Errors retrying cannot cure match drivers.ErrPermanent.
func (d *tableDriver) Acquire(ctx context.Context, req drivers.AcquireRequest) (res drivers.AcquireResult, err error) {
	if err := d.life.Check(ctx); err != nil {
		return drivers.AcquireResult{}, err
	}
	d.reclaim.Note(req.TTL)
	if req.Wait > 0 {
		res, err = d.acquireWaiting(ctx, req)
	} else {
		res, _, err = d.acquireOnce(ctx, req, &attemptOpts{fast: true})
	}
	return res, permanent(d.life.ClosedErr(err))
}

// Release frees the row if token holds it, or grants it to its queue's
// head, telling the grantee or waking the head in the same statement. A
// plain UPDATE first frees a row nobody queues for: the grant's sub-SELECT
// is planned anew when not cached. The reclaimer deletes free rows.
func (d *tableDriver) Release(ctx context.Context, key, token string) (bool, error) {
	id := sqlkit.KeyHash(key)
	live, err := d.queryRow(ctx, func(querier) (string, []any) { return d.sql.free, []any{id, token} }, nil)
	if err == nil && !live { // drivers queue for it, or token does not hold it
		live, err = d.runWaking(ctx, key, func(p querier, notified any) (string, []any) {
			fs, args := d.fencing(p, id, token, notified)
			return fs.release, args
		}, nil, nil)
	}
	return live, d.life.ClosedErr(err)
}

// runWaking runs stmt, which frees key's row and wakes its queue's head,
// as queryRow does, with the key to notify (NULL: none). When the NOTIFY
// queue is full (54000) or the role may not run the wake function (42501),
// nothing committed, it runs stmt again without the wake-up.
func (d *tableDriver) runWaking(ctx context.Context, key string, stmt func(p querier, notified any) (string, []any), dest ...any) (bool, error) {
	var notified any
	if payload(key) != "" {
		notified = key
	}
	run := func(p querier) (string, []any) { return stmt(p, notified) }
	found, err := d.queryRow(ctx, run, dest...)
	if notified != nil && (sqlState(err) == "54000" || sqlState(err) == "42501") {
		notified = nil
		found, err = d.queryRow(ctx, run, dest...)
	}
	return found, err
}

// Extend moves the row's expiry to now() + ttl if token holds it (its own
// statement: faster than a Renew of one lease).
func (d *tableDriver) Extend(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	ms, err := ttlMillis(ttl)
	if err != nil {
		return false, err
	}
	n, err := d.exec(ctx, d.sql.extend, sqlkit.KeyHash(key), token, ms)
	return n == 1, d.life.ClosedErr(err)
}

func ttlMillis(ttl time.Duration) (int64, error) {
	ms := ttl.Milliseconds()
	if ms < 1 {
		return 0, ErrTTL
	}
	return ms, nil
}

// Renew renews the leases with one UPDATE per maxRenewBatch, in id order
// (concurrent renewals must not deadlock).
func (d *tableDriver) Renew(ctx context.Context, leases []drivers.Lease) []drivers.RenewResult {
	out := make([]drivers.RenewResult, len(leases))
	order := make([]int, len(leases))
	ids := make([][]byte, len(leases))
	for i, l := range leases {
		order[i], ids[i] = i, sqlkit.KeyHash(l.Key)
	}
	slices.SortFunc(order, func(a, b int) int { return bytes.Compare(ids[a], ids[b]) })
	checked := d.life.Check(ctx)
	for batch := range slices.Chunk(order, maxRenewBatch) {
		bid, btok, bttl := make([][]byte, len(batch)), make([]string, len(batch)), make([]int64, len(batch))
		err := checked
		for j, i := range batch {
			bid[j], btok[j], bttl[j] = ids[i], leases[i].Token, leases[i].TTL.Milliseconds()
			if bttl[j] < 1 {
				err = cmp.Or(err, ErrTTL)
			}
		}
		renewed := map[string]bool{}
		if err == nil {
			err = d.life.ClosedErr(d.run(ctx, func(ctx context.Context, p querier) error {
				clear(renewed)
				var id []byte
				var tok string
				rows, _ := p.Query(ctx, d.sql.renew, bid, btok, bttl)
				_, err := pgx.ForEachRow(rows, []any{&id, &tok}, func() error {
					renewed[string(id)+"\x00"+tok] = true
					return nil
				})
				return err
			}))
		}
		for _, i := range batch {
			out[i] = drivers.RenewResult{Held: err == nil && renewed[string(ids[i])+"\x00"+leases[i].Token], Err: err}
		}
	}
	return out
}

// Inspect reads the live row of key.
func (d *tableDriver) Inspect(ctx context.Context, key string) (info drivers.LockInfo, ok bool, err error) {
	var left int64 // µs
	ok, err = d.queryRow(ctx, func(querier) (string, []any) { return d.sql.inspect, []any{sqlkit.KeyHash(key)} },
		&info.Token, &info.Fence, &left)
	info.TTL = time.Duration(left) * time.Microsecond
	return info, ok, d.life.ClosedErr(err)
}

// List returns the held locks whose keys start with prefix.
func (d *tableDriver) List(ctx context.Context, prefix string) (out []drivers.ListedLock, err error) {
	err = d.run(ctx, func(ctx context.Context, p querier) (err error) {
		rows, _ := p.Query(ctx, d.sql.list, prefix)
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (l drivers.ListedLock, err error) {
			var left int64 // µs
			err = r.Scan(&l.Key, &l.Token, &l.Fence, &left)
			l.TTL = time.Duration(left) * time.Microsecond
			return l, err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: list: %w", d.life.ClosedErr(err))
	}
	return out, nil
}

// ServerTime returns the server's clock (µs), read on the pool.
func (d *tableDriver) ServerTime(ctx context.Context) (t time.Time, err error) {
	err = d.run(ctx, func(ctx context.Context, q querier) error { return q.QueryRow(ctx, serverTimeSQL).Scan(&t) })
	return d.serverTime(t, err)
}

// Ping pings on a pooled connection; nil before the first call made the pool.
func (d *tableDriver) Ping(ctx context.Context) error {
	if p := d.pool.Load(); p != nil {
		return p.Ping(ctx)
	}
	return nil
}

// Close ends the subscriptions and the reclaimer, and closes the pool the
// driver created (not NewWithPool's). Later calls fail with ErrClosed;
// calls in flight are cut when Close is done or ctx ends (its error).
func (d *tableDriver) Close(ctx context.Context) error {
	return d.shutdown(ctx, func() {}, func(context.Context) error {
		d.reclaim.Stop()
		d.poolMu.Lock()
		defer d.poolMu.Unlock()
		if p := d.pool.Load(); d.poolCfg != nil && p != nil {
			p.Close()
		}
		return nil
	})
}

func ignoreNoRows(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	return err
}

// Handover passes key from token to next.Token in one statement when no
// live driver queues for it; else it releases key as Release does.
func (d *tableDriver) Handover(ctx context.Context, key, token string, next drivers.AcquireRequest) (released bool, res drivers.AcquireResult, err error) {
	ms, err := ttlMillis(next.TTL)
	if err != nil {
		return false, drivers.AcquireResult{}, err
	}
	var handed bool
	var fence int64
	held, err := d.runWaking(ctx, key, func(p querier, notified any) (string, []any) {
		fs, args := d.fencing(p, sqlkit.KeyHash(key), token, next.Token, ms, notified)
		return fs.handover, args
	}, nil, &handed, &fence, nil)
	if err != nil || !held || !handed {
		return held && err == nil, drivers.AcquireResult{}, d.life.ClosedErr(err)
	}
	return true, drivers.AcquireResult{Acquired: true, Fence: uint64(fence)}, nil
}
