package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mutexfx/mutexfx/drivers"
)

// maxRenewBatch is the largest number of leases renewed by one statement.
const maxRenewBatch = 10000

// ErrTTL is returned when an acquisition or extension in table mode asks for
// a ttl below one millisecond.
var ErrTTL = errors.New("postgres: ttl must be at least 1ms")

// tablePool returns the pool with the schema in place.
func (d *Driver) tablePool(ctx context.Context) (*pgxpool.Pool, error) {
	p, err := d.getPool()
	if err != nil {
		return nil, err
	}
	if err := d.ensureSchema(ctx, p.Begin); err != nil {
		return nil, fmt.Errorf("postgres: creating %s: %w", d.names.table, err)
	}
	return p, nil
}

// querier runs the table statements: a pooled connection bootCheck passed.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	// boot is what the connection's bootCheck found.
	boot() bootState
}

// run runs f on a connection of the pool, retrying serialization failures
// and deadlocks, and recreating the schema once if it was dropped. Close
// cuts it when Close's own ctx ends (the public calls then wrap its error
// with ErrClosed: closedErr).
func (d *Driver) run(ctx context.Context, f func(ctx context.Context, q querier) error) error {
	ctx, stop := d.bind(ctx)
	defer stop()
	for again := true; ; again = false {
		p, err := d.tablePool(ctx)
		if err != nil {
			return err
		}
		err = retry(ctx, func() error {
			c, err := p.Acquire(ctx)
			if err != nil {
				return err
			}
			defer c.Release()
			pc := c.Conn().PgConn()
			b, err := d.bootCheck(ctx, pc)
			if err != nil {
				return err
			}
			err = f(ctx, checkedConn{c, b})
			if crashedSince(err) {
				// The server recovered from a crash since this
				// connection's check (it outlived the crash: a pooler's):
				// check again, then take the fence.
				delete(pc.CustomData(), d.bootKey)
				if b, err = d.bootCheck(ctx, pc); err != nil {
					return err
				}
				err = f(ctx, checkedConn{c, b})
			}
			return err
		})
		if again && sqlState(err) == "42P01" {
			d.schemaLost()
			continue
		}
		return err
	}
}

func ttlMillis(ttl time.Duration) (int64, error) {
	ms := ttl.Milliseconds()
	if ms < 1 {
		return 0, ErrTTL
	}
	return ms, nil
}

// tableAcquire takes the lock in one statement; with req.Wait it waits for
// its turn (tableAcquireWaiting).
func (d *Driver) tableAcquire(ctx context.Context, req drivers.AcquireRequest) (drivers.AcquireResult, error) {
	d.noteTTL(req.TTL)
	if req.Wait > 0 {
		return d.tableAcquireWaiting(ctx, req)
	}
	res, _, err := d.tableAcquireOnce(ctx, req, attemptOpts{fast: true})
	return res, err
}

// attemptOpts are the ways tableAcquireOnce tries.
type attemptOpts struct {
	// queue: a failed attempt queues this driver for the row, or proves
	// its entry alive.
	queue bool
	// fast: try tableTake first.
	fast bool
	// deferQueue: a driver not queued yet does not queue while the row is
	// free for a queued driver (tableAcquireOnce then reports deferred).
	deferQueue bool
}

// tableTake is the uncontended path: one bare UPDATE takes the row when it
// is free (released or expired) and no driver is queued for it. It answers
// false, having written nothing, when the row is held, queued for or
// missing: tableAcquireOnce's statement then decides.
func (d *Driver) tableTake(ctx context.Context, req drivers.AcquireRequest, ms int64) (uint64, bool, error) {
	var fence int64
	var took bool
	err := d.run(ctx, func(ctx context.Context, p querier) error {
		fs, mark := d.fencing(p)
		err := p.QueryRow(ctx, fs.take, append([]any{rowID(req.Key), shownName(req.Key), req.Token, ms}, mark...)...).Scan(&fence, nil)
		took = err == nil
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	})
	return uint64(fence), took, err
}

// tableAcquireOnce inserts the row, or takes over a free or expired one
// when no live waiter queued before this driver, in one statement that
// returns the fence, or the holder's remaining ttl. With o.fast, it first
// tries tableTake, which costs about what a bare UPDATE does: an
// uncontended acquisition is then one round trip, a contended one two.
// deferred reports an attempt that did not queue, as o.deferQueue asked.
func (d *Driver) tableAcquireOnce(ctx context.Context, req drivers.AcquireRequest, o attemptOpts) (res drivers.AcquireResult, deferred bool, err error) {
	ms, err := ttlMillis(req.TTL)
	if err != nil {
		return drivers.AcquireResult{}, false, err
	}
	if o.fast {
		fence, took, err := d.tableTake(ctx, req, ms)
		if err != nil {
			return drivers.AcquireResult{}, false, err
		}
		if took {
			return drivers.AcquireResult{Acquired: true, Fence: fence}, false, nil
		}
	}
	live := WaiterLiveness.Milliseconds()
	err = d.run(ctx, func(ctx context.Context, p querier) error {
		var fence int64
		var left float64
		fs, mark := d.fencing(p)
		err := p.QueryRow(ctx, fs.acquire, append([]any{rowID(req.Key), shownName(req.Key), req.Token, ms, d.id, o.queue, live, o.deferQueue}, mark...)...).
			Scan(&res.Acquired, &fence, &left, &deferred)
		if errors.Is(err, pgx.ErrNoRows) {
			// the holder's row is not visible to the statement's snapshot
			// (inserted concurrently): taken, remaining ttl unknown
			res, deferred = drivers.AcquireResult{}, false
			return nil
		}
		res.Fence = uint64(fence)
		res.HolderTTL = 0
		if left > 0 {
			res.HolderTTL = time.Duration(left * float64(time.Millisecond))
		}
		return err
	})
	if err == nil && res.Acquired && res.Fence == 0 {
		// the row was deleted between the statement's snapshot and its
		// insert: the new row needs its fence
		err = d.run(ctx, func(ctx context.Context, p querier) error {
			var fence int64
			fs, mark := d.fencing(p)
			err := p.QueryRow(ctx, fs.refence, append([]any{rowID(req.Key), req.Token}, mark...)...).Scan(&fence)
			res.Fence = uint64(fence)
			return err
		})
	}
	if err != nil {
		return drivers.AcquireResult{}, false, err
	}
	return res, deferred, nil
}

// tableRelease marks the row free if token holds it, in one UPDATE, and
// when drivers are queued for it notifies the first live one (queueHead),
// in a second statement. The row is kept, for the next acquisition's one
// UPDATE (its fence taken under the row's lock); the reclaimer deletes it
// later (reclaim.go).
func (d *Driver) tableRelease(ctx context.Context, key, token string) (bool, error) {
	var live bool
	var queue []byte
	var now *float64
	err := d.run(ctx, func(ctx context.Context, p querier) error {
		live, queue, now = false, nil, nil
		err := p.QueryRow(ctx, d.sql.release, rowID(key), token).Scan(&live, &queue, &now)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	})
	if err != nil || !live {
		return live, err
	}
	d.wakeQueued(ctx, key, queue, now)
	return true, nil
}

// wakeQueued notifies the first live driver of queue, the queue of the row
// of key just released (nil: nobody queued), at now (ms, the server's
// clock), or, with none live, whoever listens on the shared channel.
func (d *Driver) wakeQueued(ctx context.Context, key string, queue []byte, now *float64) {
	if queue == nil || now == nil || payload(key) == "" {
		return
	}
	channel := strings.Trim(d.names.channel, `"`)
	if head := queueHead(queue, *now); head != "" {
		channel = ownChannel(head)
	}
	// the lock is released: a failed wake-up costs the waiter a poll
	_ = d.run(ctx, func(ctx context.Context, p querier) error {
		_, err := p.Exec(ctx, d.sql.notify, channel, key)
		return err
	})
}

// queueHead returns the first live driver of a row's queue (see
// buildStatements) at now (ms, the server's clock), or "".
func queueHead(queue []byte, now float64) string {
	var entries map[string][2]float64
	if json.Unmarshal(queue, &entries) != nil {
		return ""
	}
	head := ""
	var first float64
	for id, e := range entries {
		if e[1] <= now-float64(WaiterLiveness.Milliseconds()) {
			continue
		}
		if head == "" || e[0] < first || e[0] == first && id < head {
			head, first = id, e[0]
		}
	}
	return head
}

// tableExtend moves the row's expiry to now() + ttl if token holds it.
func (d *Driver) tableExtend(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	ms, err := ttlMillis(ttl)
	if err != nil {
		return false, err
	}
	var n int64
	err = d.run(ctx, func(ctx context.Context, p querier) error {
		tag, err := p.Exec(ctx, d.sql.extend, rowID(key), token, ms)
		n = tag.RowsAffected()
		return err
	})
	return n == 1, err
}

// tableRenew renews every lease with one UPDATE … FROM unnest(…) per
// maxRenewBatch leases, in name order to keep concurrent renewals from
// deadlocking.
func (d *Driver) tableRenew(ctx context.Context, leases []drivers.Lease) []drivers.RenewResult {
	out := make([]drivers.RenewResult, len(leases))
	order := make([]int, len(leases))
	ids := make([][]byte, len(leases))
	for i, l := range leases {
		order[i] = i
		ids[i] = rowID(l.Key)
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(string(ids[a]), string(ids[b])) })
	for start := 0; start < len(order); start += maxRenewBatch {
		batch := order[start:min(start+maxRenewBatch, len(order))]
		bid := make([][]byte, 0, len(batch))
		btok := make([]string, 0, len(batch))
		bttl := make([]int64, 0, len(batch))
		var bad error
		for _, i := range batch {
			ms, err := ttlMillis(leases[i].TTL)
			if err != nil {
				bad = err
			}
			bid = append(bid, ids[i])
			btok = append(btok, leases[i].Token)
			bttl = append(bttl, ms)
		}
		renewed := map[string]bool{}
		err := bad
		if err == nil {
			err = d.run(ctx, func(ctx context.Context, p querier) error {
				clear(renewed)
				rows, err := p.Query(ctx, d.sql.renew, bid, btok, bttl)
				if err != nil {
					return err
				}
				defer rows.Close()
				var id []byte
				var tok string
				for rows.Next() {
					if err := rows.Scan(&id, &tok); err != nil {
						return err
					}
					renewed[string(id)+"\x00"+tok] = true
				}
				return rows.Err()
			})
		}
		for _, i := range batch {
			out[i] = drivers.RenewResult{Held: err == nil && renewed[string(ids[i])+"\x00"+leases[i].Token], Err: err}
		}
	}
	return out
}

// tableInspect reads the live row of key.
func (d *Driver) tableInspect(ctx context.Context, key string) (drivers.LockInfo, bool, error) {
	var info drivers.LockInfo
	var ok bool
	err := d.run(ctx, func(ctx context.Context, p querier) error {
		var fence int64
		var left float64
		err := p.QueryRow(ctx, d.sql.inspect, rowID(key)).Scan(&info.Token, &fence, &left)
		if errors.Is(err, pgx.ErrNoRows) {
			ok = false
			return nil
		}
		ok = err == nil
		info.Fence = uint64(fence)
		info.TTL = time.Duration(left * float64(time.Millisecond))
		return err
	})
	return info, ok, err
}
