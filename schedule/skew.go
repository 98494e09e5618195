package schedule

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
)

// skewEvery is how often a job's clock is compared with its store's.
const skewEvery = time.Minute

// skewCheck is the state of a job's clock comparisons.
type skewCheck struct {
	mu     sync.Mutex
	last   time.Time // when the clocks were last compared
	warned bool
}

// skewLimit is the largest difference between an instance's clock and the
// store's that keeps the instants of j exactly once: two instances each
// within it of the store's clock differ by less than half the hold, the
// limit between instances (see Job.Exclusive).
func (p plan) skewLimit(planned time.Time) time.Duration {
	return p.hold(planned) / 4
}

// checkSkew compares the scheduler's clock with the store's after an
// exclusive instant of j, once a minute at most (the first instant
// included), when the store's driver implements drivers.ServerClock. A difference
// beyond the job's limit (less half the round trip, the reading's
// uncertainty) is logged at warn level once per job.
func (s *Scheduler) checkSkew(ctx context.Context, log *zap.Logger, j *job, m *component.Mutex, planned time.Time) {
	sc, ok := m.Driver().(drivers.ServerClock)
	if !ok || ctx.Err() != nil {
		return
	}
	c := &j.skew
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if c.warned || (!c.last.IsZero() && now.Sub(c.last) < skewEvery) {
		return
	}
	c.last = now
	before := s.opts.Clock.Now()
	server, err := sc.ServerTime(ctx)
	if err != nil {
		log.Debug("store's clock not read", zap.Error(err))
		return
	}
	rtt := s.opts.Clock.Now().Sub(before)
	skew := before.Add(rtt / 2).Sub(server)
	limit := j.plan.skewLimit(planned)
	if skew.Abs()-rtt/2 <= limit {
		return
	}
	c.warned = true
	log.Warn("clock skew with the lock store exceeds the job's safe limit: an instant may run twice",
		zap.String("store", m.Name()), zap.Duration("skew", skew), zap.Duration("limit", limit),
		zap.Duration("roundTrip", rtt))
}
