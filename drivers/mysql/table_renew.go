package mysql

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/sqlkit"
)

// renew extends leases with one UPDATE per RenewBatch leases of one ttl;
// when it changed fewer rows than given, a SELECT tells which are held.
func (d *tableDriver) renew(ctx context.Context, leases []drivers.Lease) []drivers.RenewResult {
	out := make([]drivers.RenewResult, len(leases))
	byTTL := map[time.Duration][]int{}
	var order []time.Duration
	for i, l := range leases {
		if l.TTL <= 0 {
			out[i].Err = errTTL(l.TTL)
			continue
		}
		if _, ok := byTTL[l.TTL]; !ok {
			order = append(order, l.TTL)
		}
		byTTL[l.TTL] = append(byTTL[l.TTL], i)
	}
	for _, ttl := range order {
		for chunk := range slices.Chunk(byTTL[ttl], d.s.batch) {
			d.renewChunk(ctx, leases, chunk, ttl, out)
		}
	}
	return out
}

// renewChunk renews chunk (indexes of leases of one ttl) into out.
func (d *tableDriver) renewChunk(ctx context.Context, leases []drivers.Lease, chunk []int, ttl time.Duration, out []drivers.RenewResult) {
	hashes := make([][]byte, len(chunk))
	args, pairs := []any{ttl.Microseconds()}, make([]any, 0, 2*len(chunk))
	for j, i := range chunk {
		hashes[j] = sqlkit.KeyHash(leases[i].Key)
		args = append(args, hashes[j])
		pairs = append(pairs, hashes[j], leases[i].Token)
	}
	args = append(args, pairs...)
	held := fmt.Sprintf("name_hash IN (%s) AND (name_hash, token) IN (%s) AND expires_at >= UTC_TIMESTAMP(6)",
		marks("?", len(chunk)), marks("(?,?)", len(chunk)))
	query := fmt.Sprintf("UPDATE %s SET expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND WHERE %s", d.s.table, held)
	var changed int64
	err := d.retry(ctx, func() error {
		res, err := d.db.ExecContext(ctx, query, args...)
		if err != nil {
			return err
		}
		changed, err = res.RowsAffected()
		return err
	})
	all := changed == int64(len(chunk))
	found := map[[2]string]bool{}
	if err == nil && !all { // some were not renewed: read which are held
		var h, tok []byte
		err = queryRows(ctx, d.db, fmt.Sprintf("SELECT name_hash, token FROM %s WHERE %s", d.s.table, held), args[1:],
			[]any{&h, &tok}, func() { found[[2]string{string(h), string(tok)}] = true })
	}
	for j, i := range chunk {
		if err != nil {
			out[i].Err = fmt.Errorf("mysql: renew: %w", err)
		} else {
			out[i].Held = all || found[[2]string{string(hashes[j]), leases[i].Token}]
		}
	}
}
