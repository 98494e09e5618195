//go:build unix

package etcd

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestQuorumLost: a cluster that loses two of its three members answers
// nothing: the holder's renewals fail and it is told ErrLost by its
// tracked expiry (within the ttl of its last renewal). The component then
// releases the lock, which fails while there is no quorum; the driver
// keeps trying (every waiterLinger), so once a quorum is back the lock
// goes to another holder within the ttl, before the lease (which a new
// leader gives its whole ttl again) could end, with a higher fence.
func TestQuorumLost(t *testing.T) {
	c := testutil.StartEtcd(t, 3)
	ctx := t.Context()
	m := mutex(t, open(t, Options{Endpoints: c.Endpoints(), DialTimeout: time.Second}))
	l, err := m.Acquire(ctx, "quorum")
	if err != nil {
		t.Fatal(err)
	}
	c.Members[0].Kill()
	c.Members[1].Kill()
	killed := time.Now()
	select {
	case <-l.Done():
	case <-time.After(faultTTL + 10*time.Second):
		t.Fatalf("holder not told %v after the cluster lost its quorum", time.Since(killed))
	}
	if took := time.Since(killed); took > faultTTL+time.Second {
		t.Errorf("holder told %v after the cluster lost its quorum; want by its tracked expiry (ttl %v)", took, faultTTL)
	}
	if !errors.Is(context.Cause(l.Context()), component.ErrLost) {
		t.Fatalf("cause %v; want ErrLost", context.Cause(l.Context()))
	}
	c.Members[0].Restart() // waits until the member is healthy: a leader again
	other := mutex(t, open(t, Options{Endpoints: c.Endpoints()}))
	l2, err := other.Acquire(ctx, "quorum", component.WithTimeout(faultTTL))
	if err != nil {
		t.Fatalf("acquire within %v of a quorum back: %v; the lost holder's driver has not freed it", faultTTL, err)
	}
	defer l2.Release(ctx)
	if l2.Fence() <= l.Fence() {
		t.Fatalf("fence %d after the lost holder's %d", l2.Fence(), l.Fence())
	}
}
