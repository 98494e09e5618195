package component

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// lose marks a held lock lost, for cause (a Cause constant) and reason (its
// words, in the log and the lock's error); m.mu held.
//
// The log line carries what an operator needs to act: the store (in m.log),
// name, key, fence, the token's first characters (to match what the store
// shows) and a hash of it (the whole token can release the lock: it is
// never logged), how long it was held, the cause and when it was last
// confirmed in the store.
func (m *Mutex) lose(l *Lock, cause, reason string) {
	if l.state != stateHeld {
		return
	}
	now := time.Now()
	m.log.Warn("mutex lock lost",
		zap.String("lock", l.name()),
		zap.String("key", l.key),
		zap.Uint64("fence", l.fence),
		zap.String("token_prefix", TokenPrefix(l.token)),
		zap.String("token_sha256", TokenHash(l.token)),
		zap.Duration("held_for", now.Sub(l.acquiredAt)),
		zap.String("cause", cause),
		zap.String("reason", reason),
		zap.Time("last_renewal", l.renewedAt),
		zap.Duration("since_last_renewal", now.Sub(l.renewedAt)),
	)
	m.tel.lost(l, cause)
	m.end(l, stateLost, fmt.Errorf("%w: %q: %s", ErrLost, l.name(), reason))
}

// TokenHash returns the first 12 hex digits of the SHA-256 of a lock token:
// what logs show of a token, enough to tell holders apart, useless to
// release the lock with.
func TokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:6])
}

// tokenPrefixLen is how much of a token TokenPrefix shows: 8 of its 26
// random base32 characters (40 of 130 bits), leaving 90 bits unknown.
const tokenPrefixLen = 8

// TokenPrefix returns the first 8 characters of a lock token: what logs
// show of it, enough to match it with the value a store shows (redis-cli
// GET, a table's token column), far too little to release the lock with.
func TokenPrefix(token string) string {
	return token[:min(len(token), tokenPrefixLen)]
}
