package sqlkit

import (
	"context"
	"fmt"

	"github.com/mutexfx/mutexfx/internal/backoff"
)

// Retry runs f, a statement, until it succeeds or again(attempt, err)
// refuses another attempt (attempt counts f's failures, from 1), pausing
// between attempts as p says (jittered, so that the two sides of a
// conflict do not meet again). When ctx ends during a pause it returns
// ctx's cause, wrapping f's last error too.
func Retry(ctx context.Context, p backoff.Policy, f func() error, again func(attempt int, err error) bool) error {
	b := p.New()
	for attempt := 1; ; attempt++ {
		err := f()
		if err == nil || !again(attempt, err) {
			return err
		}
		if !backoff.Sleep(ctx, b.Next()) {
			return fmt.Errorf("%w (retrying: %w)", context.Cause(ctx), err)
		}
	}
}
