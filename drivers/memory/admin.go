package memory

import (
	"context"
	"strings"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
)

var _ drivers.Lister = (*Driver)(nil)

// List returns the unexpired locks whose keys start with prefix.
func (d *Driver) List(ctx context.Context, prefix string) ([]drivers.ListedLock, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []drivers.ListedLock
	for k, e := range d.locks {
		if !strings.HasPrefix(k, prefix) || !e.expires.After(now) {
			continue
		}
		out = append(out, drivers.ListedLock{Key: k, LockInfo: drivers.LockInfo{Token: e.token, Fence: e.fence, TTL: e.expires.Sub(now)}})
	}
	return out, nil
}
