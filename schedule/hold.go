package schedule

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/mutexfx/mutexfx/component"
)

// stopWarnAfter is how long Stop waits for holds before it logs them.
const stopWarnAfter = time.Second

// hold keeps l, j's lock, until the clock reads until, so that instances
// whose clocks are late find it held and skip the instant. The scheduler's
// stop does not end it (those instances still run); l ending (lost) and
// the end of a Stop's ctx do (see Stop).
func (s *Scheduler) hold(j *job, l *component.Lock, until time.Time) {
	ctx, cancel := context.WithCancel(s.holds)
	defer cancel()
	defer context.AfterFunc(l.Context(), cancel)()
	s.mu.Lock()
	if s.holding == nil {
		s.holding = map[*job]time.Time{}
	}
	s.holding[j] = until
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.holding, j)
		s.mu.Unlock()
	}()
	_ = s.opts.Clock.SleepUntil(ctx, until)
}

// warnHolds logs the holds a Stop is waiting for, if any.
func (s *Scheduler) warnHolds() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for j, until := range s.holding {
		s.log.Warn("stop waits for an exclusive job's hold, so that no instance with a late clock runs its instant again",
			zap.String("job", j.Name), zap.Time("until", until),
			zap.Duration("left", until.Sub(s.opts.Clock.Now())))
	}
}
