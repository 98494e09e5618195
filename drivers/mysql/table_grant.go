package mysql

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
)

// Direct grants (fair hand-off on). Every write here is a commit, and on
// most servers a commit waits for a log flush (innodb_flush_log_at_trx_commit
// = 1): the cost of a hand-off is its commits in a row. So a release whose
// row has a live queue head (its entry stamped within WaiterLiveness) does
// not free the row: in the same UPDATE it passes it to that head's driver,
// with the next fence, a grant token naming the driver and the fence
// (grantToken), and an expiry of the releasing driver's last ttl plus
// WaiterLiveness. The head's next attempt finds the row granted to its
// driver and, when the grant lasts at least the ttl it asks for, owns it
// without writing anything; otherwise it takes the row in a write as from a
// free row. One commit per hand-off instead of two.
//
// The row keeps the grant token until the holder's first Extend or Renew
// (which writes the component's token in the same statement); meanwhile
// this driver translates the component's token to the grant token
// (grants), and Inspect and List show the component's token through this
// driver (other processes see the grant token, which names no holder).
//
// The price: a head whose process died less than WaiterLiveness ago may be
// granted the lock, which then stays held until the grant expires (ttl +
// WaiterLiveness), as a holder that died holds it until its ttl.

// grantBit marks an attempt's outcome (with heldMark) as "granted to this
// driver, long enough": the row is this driver's, unchanged (table_fair.go).
const grantBit = 1 << 53

// emptyBit marks a release's outcome: nobody queued (tableReleaseSQL).
const emptyBit = 1 << 51

// grantPrefix starts every grant token.
const grantPrefix = "mutexfx-grant:"

// grantTokenSQL is the grant token of the driver id expression by and the
// fence expression f.
func grantTokenSQL(by, f string) string {
	return fmt.Sprintf("CONCAT('%s', HEX(%s), ':', %s)", grantPrefix, by, f)
}

// grantToken is the grant token of driver id and fence, as grantTokenSQL
// makes it.
func grantToken(id []byte, fence uint64) string {
	return fmt.Sprintf("%s%s:%d", grantPrefix, strings.ToUpper(hex.EncodeToString(id)), fence)
}

// tableReleaseSQL frees the row if token holds it, keeping the row (and
// its fence), or grants it to the live head of its queue (see above).
// LAST_INSERT_ID: the fence when released (+ emptyBit when nobody
// queued), grantBit + the new fence when granted (>= 1: it matched). Parameters: grant ttl µs (0: never grant)
// twice, name_hash, token. %[1]s the table, %[2]s the head's liveness condition,
// %[3]s the grant token. Assignments run left to right: fence first,
// queue after taken_by, expires_at (which WHERE reads) last.
const tableReleaseSQL = `UPDATE %[1]s SET
 fence = IF(LAST_INSERT_ID(IF(%[2]s, %[4]d + fence + 1, fence + IF(queue = '', %[6]d, 0))) & %[4]d, fence + 1, fence),
 token = IF(LAST_INSERT_ID() & %[4]d, %[3]s, ''),
 taken_by = IF(LAST_INSERT_ID() & %[4]d, LEFT(queue, 16), taken_by),
 queue = IF(LAST_INSERT_ID() & %[4]d, SUBSTRING(queue, %[5]d), queue),
 expires_at = IF(LAST_INSERT_ID() & %[4]d, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, '1000-01-01 00:00:00')
WHERE name_hash = ? AND token = ? AND expires_at >= UTC_TIMESTAMP(6)`

// releaseSQL is tableReleaseSQL for the driver's table and settings: the
// head may be granted when fair hand-off is on, its entry is fresh and the
// grant ttl is positive; the condition is read before any assignment.
func (s settings) releaseSQL() string {
	live := "(? > 0 AND FALSE)"
	if s.liveness > 0 {
		live = fmt.Sprintf("(? > 0 AND LENGTH(queue) >= %d AND SUBSTRING(queue, 17, 13) >= %s)", entryWidth, stampSQL(s.liveness.Milliseconds()))
	}
	return fmt.Sprintf(tableReleaseSQL, s.table, live, grantTokenSQL("LEFT(queue, 16)", "fence"), grantBit, entryWidth+1, emptyBit)
}

// grant is a lock this driver owns through a grant whose row still holds
// the grant token.
type grant struct {
	token, row string // the component's token, the grant token
}

// grants translates the component's tokens of granted locks to their grant
// tokens, per key, and lets each grant be claimed or given back once.
type grants struct {
	mu   sync.Mutex
	m    map[string]grant
	used map[string]usedGrant // per key, the last grant claimed or given back
	hot  map[string]bool      // keys waited for: their releases try the grant first
	// ttl is the ttl of this driver's last acquisition: what its releases
	// grant (plus WaiterLiveness).
	ttl time.Duration
}

// usedGrant is the fence of the last grant of a key claimed or given back,
// and when.
type usedGrant struct {
	fence uint64
	at    time.Time
}

// use marks key's grant with fence as claimed or given back; false when it
// or a later one was already (fences grow: a read that found a grant may
// be answered after another attempt claimed it, or after it was given
// back, even released, and granted again). g.mu held.
func (g *grants) use(key string, fence uint64) bool {
	if u, ok := g.used[key]; ok && fence <= u.fence {
		return false
	}
	now := time.Now()
	if len(g.used) >= maxReturned {
		for k, u := range g.used { // reads in flight are long answered
			if now.Sub(u.at) > usedFor {
				delete(g.used, k)
			}
		}
	}
	if g.used == nil {
		g.used = map[string]usedGrant{}
	}
	g.used[key] = usedGrant{fence, now}
	return true
}

// usedFor is how long a used grant is remembered past maxReturned keys.
const usedFor = time.Minute

// claim records that token owns key through the grant with fence, unless
// that grant was claimed or given back already (then the attempt failed).
func (g *grants) claim(key, token string, fence uint64, row string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.use(key, fence) {
		return false
	}
	if g.m == nil {
		g.m = map[string]grant{}
	}
	g.m[key] = grant{token, row}
	return true
}

// giveBack marks key's grant with fence as given back, unless it was
// claimed (or given back) already.
func (g *grants) giveBack(key string, fence uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.use(key, fence)
}

// maxReturned bounds the contended keys remembered, and the used grants
// before the older ones are forgotten.
const maxReturned = 1024

// row returns the token to match key's row with for token: its grant
// token when token owns key through a grant, else token.
func (g *grants) row(key, token string) string { return g.swap(key, token, true) }

// shown returns the token to show for key's row token: the component's
// token when it is this driver's grant token.
func (g *grants) shown(key, token string) string { return g.swap(key, token, false) }

// swap is row (toRow) or shown.
func (g *grants) swap(key, token string, toRow bool) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	gr, ok := g.m[key]
	switch {
	case ok && toRow && gr.token == token:
		return gr.row
	case ok && !toRow && gr.row == token:
		return gr.token
	}
	return token
}

// drop forgets key's grant if token owns it.
func (g *grants) drop(key, token string) {
	g.mu.Lock()
	if gr, ok := g.m[key]; ok && gr.token == token {
		delete(g.m, key)
	}
	g.mu.Unlock()
}

// contend records that key was waited for.
func (g *grants) contend(key string) {
	g.mu.Lock()
	if g.hot == nil || len(g.hot) >= maxReturned {
		g.hot = map[string]bool{}
	}
	g.hot[key] = true
	g.mu.Unlock()
}

// uncontend records that key was freed with nobody queued.
func (g *grants) uncontend(key string) {
	g.mu.Lock()
	delete(g.hot, key)
	g.mu.Unlock()
}

// contended reports whether key was waited for since it was last freed
// with nobody queued.
func (g *grants) contended(key string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.hot[key]
}

// noteTTL records the ttl of an acquisition.
func (g *grants) noteTTL(ttl time.Duration) {
	g.mu.Lock()
	g.ttl = ttl
	g.mu.Unlock()
}

// grantTTL is what a release grants the queue head, in µs (0: no grant).
func (g *grants) grantTTL(liveness time.Duration) int64 {
	if liveness <= 0 {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ttl <= 0 {
		return 0
	}
	return (g.ttl + liveness).Microseconds()
}

// giveBack releases (or grants on) key's row granted to this driver with
// fence when no attempt claimed it: its waiter stopped asking.
func (d *tableDriver) giveBack(ctx context.Context, key string, fence uint64) {
	row := grantToken(d.id, fence)
	if !d.grants.giveBack(key, fence) {
		return
	}
	ttl := d.grants.grantTTL(d.s.liveness)
	if id, _, err := d.tableExec(ctx, d.releaseSQL, ttl, ttl, keyHash(key), row); err == nil && id >= 1 {
		d.subs.Publish(drivers.Event{Kind: drivers.Released, Key: key})
	}
}

// peekSQL reads a waited-for row without locking it: whether it is
// granted to this driver long enough (claim), or at all (mine); whether an
// attempt would change nothing (held by another, this driver's entry
// fresh: skip); whether it is held by another driver (held: without skip,
// the queueing statement is the one to run); the fence and the holder's
// remaining µs. Parameters: driver id, ttl µs, name_hash.
func (s settings) peekSQL() string {
	mine := "INSTR(queue, m.me)"
	return fmt.Sprintf(`SELECT fence, %[1]s AND expires_at >= UTC_TIMESTAMP(6) + INTERVAL m.ttl MICROSECOND, %[1]s AND expires_at >= UTC_TIMESTAMP(6),
 expires_at >= UTC_TIMESTAMP(6) AND NOT %[1]s AND %[2]s > 0 AND SUBSTRING(queue, %[2]s + 16, 13) >= %[3]s,
 expires_at >= UTC_TIMESTAMP(6) AND NOT %[1]s AND taken_by <> m.me,
 GREATEST(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at), 1)
FROM %[4]s, (SELECT CAST(? AS BINARY) AS me, CAST(? AS SIGNED) AS ttl) AS m WHERE name_hash = ?`,
		mineGrant("m.me"), mine, stampSQL(s.liveness.Milliseconds()*3/8), s.table)
}

// peek reads key's row for a waiting attempt (peekSQL): a grant to claim,
// or a held row to wait for without a locking statement. ok is false when
// the attempt must run its statements.
func (d *tableDriver) peek(ctx context.Context, req drivers.AcquireRequest) (res drivers.AcquireResult, ok, held bool, err error) {
	var fence uint64
	var claim, mine, skip bool
	var us int64
	err = d.retry(ctx, func() error {
		return d.db.QueryRowContext(ctx, d.peekSQL, d.id, req.TTL.Microseconds(), keyHash(req.Key)).Scan(&fence, &claim, &mine, &skip, &held, &us)
	})
	switch {
	case errors.Is(err, sql.ErrNoRows) || err != nil && missingTable(err):
		return res, false, false, nil
	case err != nil:
		return res, false, false, err
	case mine:
		res, err := d.claimGrant(ctx, req, fence)
		return res, true, false, err
	case skip:
		ttl := time.Duration(us) * time.Microsecond
		if retry := d.watch.failed(req.Key, false); retry > 0 && retry < ttl {
			ttl = retry
		}
		return drivers.AcquireResult{HolderTTL: ttl}, true, false, nil
	}
	return res, false, held, nil
}

// claimGrant takes key's row granted to this driver with fence for
// req.Token: it writes the token and the expiry in the row, and answers
// Acquired only once that commit is durable. A commit is visible to other
// sessions before its redo is flushed: a grant only read could be lost
// with a server crash while its grantee holds the lock, and its fence
// reissued. Nobody else writes a row granted to this driver until it
// expires; grants keeps two attempts of this driver from claiming one.
func (d *tableDriver) claimGrant(ctx context.Context, req drivers.AcquireRequest, fence uint64) (drivers.AcquireResult, error) {
	row := grantToken(d.id, fence)
	if !d.grants.claim(req.Key, req.Token, fence, row) { // claimed here already, or given back
		return drivers.AcquireResult{HolderTTL: d.s.poll}, nil
	}
	id, _, err := d.tableExec(ctx, fmt.Sprintf(tableExtendSQL, d.s.table), req.Token, req.TTL.Microseconds(), keyHash(req.Key), row)
	d.grants.drop(req.Key, req.Token)
	if err != nil || id < 1 {
		return drivers.AcquireResult{HolderTTL: d.s.fastPoll()}, err
	}
	d.watch.remove(req.Key)
	d.grants.noteTTL(req.TTL)
	return drivers.AcquireResult{Acquired: true, Fence: fence}, nil
}
