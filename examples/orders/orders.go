package main

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Orders is the stand-in order database and payment provider.
type Orders struct {
	payTime time.Duration
	log     *zap.Logger

	mu      sync.Mutex
	status  map[string]string // id → "unpaid", "paid", "refunded", "expired"
	created map[string]time.Time
	charges atomic.Int32 // payments charged, for the demo
	expired chan time.Time
}

// NewOrders returns a few unpaid orders.
func NewOrders(s Settings, log *zap.Logger) *Orders {
	o := &Orders{payTime: s.PayTime, log: log, status: map[string]string{}, created: map[string]time.Time{}, expired: make(chan time.Time, 1)}
	for _, id := range []string{"7", "42", "99"} {
		o.status[id] = "unpaid"
		o.created[id] = time.Now()
	}
	return o
}

var errNotFound = errors.New("no such order")

// Pay charges an unpaid order. Holding the order's lock, two requests can
// never both see "unpaid" and charge twice.
func (o *Orders) Pay(ctx context.Context, id string) (charged bool, err error) {
	st, err := o.get(id)
	if err != nil || st != "unpaid" {
		return false, err
	}
	select { // the payment provider's call
	case <-time.After(o.payTime):
	case <-ctx.Done(): // the client left, or the lock was lost
		return false, context.Cause(ctx)
	}
	o.charges.Add(1)
	o.set(id, "paid")
	return true, nil
}

// Refund refunds a paid order.
func (o *Orders) Refund(_ context.Context, id string) (bool, error) {
	st, err := o.get(id)
	if err != nil || st != "paid" {
		return false, err
	}
	o.set(id, "refunded")
	return true, nil
}

// ExpireUnpaid expires the orders unpaid for more than a day: the exclusive
// schedule's job.
func (o *Orders) ExpireUnpaid(context.Context) error {
	o.mu.Lock()
	n := 0
	for id, st := range o.status {
		if st == "unpaid" && time.Since(o.created[id]) > 24*time.Hour {
			o.status[id] = "expired"
			n++
		}
	}
	o.mu.Unlock()
	o.log.Info("expired unpaid orders", zap.Int("expired", n))
	select {
	case o.expired <- time.Now():
	default:
	}
	return nil
}

func (o *Orders) get(id string) (string, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	st, ok := o.status[id]
	if !ok {
		return "", errNotFound
	}
	return st, nil
}

func (o *Orders) set(id, st string) {
	o.mu.Lock()
	o.status[id] = st
	o.mu.Unlock()
}
