package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
)

// startMonitor starts the goroutine that, every ProbeInterval while locks
// are held, checks them all in one query (per RenewBatch locks) and reports
// those whose connection no longer holds them. It ends with Close.
func (a *advisory) startMonitor() {
	a.monitorWG.Add(1)
	go func() {
		defer a.monitorWG.Done()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() { // ends when the monitor ends or the driver closes
			select {
			case <-a.d.closed:
				cancel()
			case <-ctx.Done():
			}
		}()
		t := time.NewTicker(a.d.s.probe)
		defer t.Stop()
		for {
			select {
			case <-a.d.closed:
				return
			case <-t.C:
			}
			a.mu.Lock()
			hs := make([]*heldLock, 0, len(a.held))
			for _, h := range a.held {
				hs = append(hs, h)
			}
			a.mu.Unlock()
			if len(hs) == 0 {
				continue
			}
			pctx, pcancel := context.WithTimeout(ctx, max(a.d.s.probe, time.Second))
			held, errs := a.probe(pctx, hs)
			pcancel()
			for i, h := range hs {
				if errs[i] == nil && !held[i] {
					a.lose(h)
				}
			}
		}
	}()
}

// probe asks the server, in one query per RenewBatch locks on any pooled
// connection, which connection holds each lock, and reports whether it is
// still the lock's own.
func (a *advisory) probe(ctx context.Context, hs []*heldLock) (held []bool, errs []error) {
	held = make([]bool, len(hs))
	errs = make([]error, len(hs))
	for start := 0; start < len(hs); start += a.d.s.batch {
		chunk := hs[start:min(start+a.d.s.batch, len(hs))]
		args := make([]any, len(chunk))
		for i, h := range chunk {
			args[i] = h.name
		}
		q := "SELECT " + strings.TrimSuffix(strings.Repeat("IS_USED_LOCK(?),", len(chunk)), ",")
		ids := make([]sql.NullInt64, len(chunk))
		dest := make([]any, len(chunk))
		for i := range ids {
			dest[i] = &ids[i]
		}
		err := a.d.db.QueryRowContext(ctx, q, args...).Scan(dest...)
		for i, h := range chunk {
			if err != nil {
				errs[start+i] = fmt.Errorf("mysql: probe: %w", err)
				continue
			}
			held[start+i] = ids[i].Valid && ids[i].Int64 == h.connID
		}
	}
	return held, errs
}

// renew checks many advisory leases with probe (ttl is ignored: these
// locks do not expire) and reports the lost ones.
func (a *advisory) renew(ctx context.Context, leases []drivers.Lease) []drivers.RenewResult {
	out := make([]drivers.RenewResult, len(leases))
	var hs []*heldLock
	var idx []int
	for i, l := range leases {
		if h := a.get(l.Key, l.Token); h != nil {
			hs = append(hs, h)
			idx = append(idx, i)
		}
	}
	if len(hs) == 0 {
		return out
	}
	held, errs := a.probe(ctx, hs)
	for j, h := range hs {
		i := idx[j]
		switch {
		case errs[j] != nil && ctx.Err() != nil:
			// The caller's deadline passed without an answer: the component
			// counts the lock lost, so drop its connection too, or the
			// server would keep the lock for a holder that let it go.
			a.lose(h)
			out[i].Err = errs[j]
		case errs[j] != nil:
			out[i].Err = errs[j]
		case held[j]:
			out[i].Held = true
		default:
			a.lose(h)
		}
	}
	return out
}
