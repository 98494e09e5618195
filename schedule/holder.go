package schedule

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"go.uber.org/zap"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
)

// holderID names a holding of a lock in logs: the first 8 bytes of the
// SHA-256 of its token, in hex, so that the skipping instances' lines
// and the holder's name the same holding without the token itself (which
// releases the lock) appearing in logs. "" for an unknown token.
func holderID(token string) string {
	if token == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:8])
}

// sawHolder records the token of the holder j's last instant found (""
// when this instance ran it) and returns the previous one.
func (j *job) sawHolder(token string) string {
	j.mu.Lock()
	defer j.mu.Unlock()
	prev := j.lastHolder
	j.lastHolder = token
	return prev
}

// skipped logs the instant planned of j skipped because another holder
// has its lock, naming the holder when the store tells it: at info level
// when that holder is the one found at j's previous instant (its run has
// outlived the period), else at debug level. It then watches the holding
// (see watch) when the store can describe it.
func (s *Scheduler) skipped(ctx context.Context, log *zap.Logger, j *job, m *component.Mutex, planned time.Time) {
	const msg = "exclusive job run by another instance, skipped"
	s.count(j, OutcomeSkippedHeldElsewhere)
	log = log.With(zap.String("lock", j.lock))
	ins, ok := m.Driver().(drivers.Inspector)
	if !ok {
		log.Debug(msg)
		return
	}
	key := m.Prefix() + j.lock
	// The store reads the remaining ttl at the earliest when the look is
	// sent: the holding's expiry is no earlier than seen + info.TTL.
	seen := time.Now()
	info, held, err := ins.Inspect(ctx, key)
	switch {
	case err != nil:
		log.Debug(msg, zap.NamedError("inspectError", err))
		return
	case !held:
		log.Debug(msg, zap.String("holder", "released since"))
		return
	}
	fields := []zap.Field{zap.Uint64("fence", info.Fence), zap.Duration("holderTTL", info.TTL)}
	if id := holderID(info.Token); id != "" {
		fields = append(fields, zap.String("holder", id))
	}
	if h, ok := component.ParseHolder(info.Token); ok {
		fields = append(fields, zap.String("holderApp", h.Application), zap.String("holderHost", h.Host), zap.Int("holderPID", h.PID))
	}
	if prev := j.sawHolder(info.Token); info.Token != "" && prev == info.Token {
		log.Info("exclusive job still run by another instance for an earlier instant, skipped",
			append(fields, zap.String("cause", "the holder's run outlived the period"))...)
	} else {
		log.Debug(msg, fields...)
	}
	if j.watching.CompareAndSwap(false, true) {
		s.wg.Go(func() {
			defer j.watching.Store(false)
			s.watch(log, j, m, ins, key, planned, info, seen)
		})
	}
}
