package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/mysql"
)

// renewal holds *rows table-mode locks and renews them all, as the
// component does every ttl/3, counting the statements the server ran.
func renewal() error {
	ctx := context.Background()
	d, err := mysql.New(mysql.Options{DSN: *dsn, Mode: mysql.ModeTable, Table: "mutexfx_bench_locks"})
	if err != nil {
		return err
	}
	defer d.Close(ctx)
	id := rand.Text()[:8]
	leases := make([]drivers.Lease, *rows)
	start := time.Now()
	for i := range leases {
		leases[i] = drivers.Lease{Key: fmt.Sprintf("bench-renew:%s:%d", id, i), Token: rand.Text(), TTL: time.Minute}
		res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: leases[i].Key, Token: leases[i].Token, TTL: time.Minute})
		if err != nil || !res.Acquired {
			return fmt.Errorf("acquire %d: %+v %v", i, res, err)
		}
	}
	acquired := time.Since(start)
	db, err := openDB(true)
	if err != nil {
		return err
	}
	defer db.Close()
	fmt.Printf("Renewal of %d table-mode locks (batch %d; %v to acquire them one by one):\n\n", *rows, mysql.DefaultRenewBatch, acquired.Round(time.Millisecond))
	fmt.Println("| renewal period | time | statements (server Questions Δ, whole server) | held |")
	fmt.Println("|---|---|---|---|")
	for p := 1; p <= 3; p++ {
		before := questions(db)
		start := time.Now()
		res := d.Renew(ctx, leases)
		took := time.Since(start)
		after := questions(db)
		held := 0
		for _, r := range res {
			if r.Err != nil {
				return r.Err
			}
			if r.Held {
				held++
			}
		}
		fmt.Printf("| #%d | %s | %d | %d/%d |\n", p, ms(took), after-before-1, held, len(leases))
	}
	for _, l := range leases {
		if _, err := d.Release(ctx, l.Key, l.Token); err != nil {
			return err
		}
	}
	return nil
}

// questions is the server's count of statements received.
func questions(db *sql.DB) int64 {
	var name string
	var v int64
	_ = db.QueryRow("SHOW GLOBAL STATUS LIKE 'Questions'").Scan(&name, &v)
	return v
}
