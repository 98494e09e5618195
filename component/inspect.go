package component

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
)

// ErrNotSupported reports a store that cannot do what was asked (inspect,
// list or force-release its locks).
var ErrNotSupported = drivers.ErrNotSupported

// LockStatus describes a held lock as its store tells it.
type LockStatus struct {
	// Name is the lock's name (without the store's prefix).
	Name string `json:"name"`
	// Holder is who holds the lock; HolderKnown is false when the store
	// does not tell it (a token not made by a Mutex, or an advisory lock
	// whose holder the store could not record). For a PostgreSQL or MySQL
	// advisory lock held by another process the store tells the
	// application, host and pid, not Holder.AcquiredAt (zero).
	Holder      Holder `json:"holder"`
	HolderKnown bool   `json:"holderKnown"`
	// Fence is the lock's fencing token (zero when the store does not
	// tell it).
	Fence uint64 `json:"fence"`
	// TTL is the time left before the lock expires unless renewed; zero for
	// locks that do not expire (advisory locks).
	TTL time.Duration `json:"ttl"`
	// token is the holder's token, kept for ForceRelease: it is not shown,
	// as it lets whoever has it release the lock.
	token string
}

// Inspect returns the holder, fence, acquisition time (in Holder) and ttl
// left of the lock name in the store, whoever holds it; held is false when
// it is free. It fails with ErrNotSupported for stores that cannot be
// inspected.
func (m *Mutex) Inspect(ctx context.Context, name string) (st LockStatus, held bool, err error) {
	m.mustBuilt()
	mustCtx(ctx)
	in, ok := m.drv.(drivers.Inspector)
	if !ok {
		return LockStatus{}, false, ErrNotSupported
	}
	if name == "" {
		return LockStatus{}, false, ErrEmptyName
	}
	info, held, err := in.Inspect(ctx, m.opts.Prefix+name)
	if err != nil {
		return LockStatus{}, false, m.driverError("inspect", name, err)
	}
	if !held {
		return LockStatus{}, false, nil
	}
	return status(name, info), true, nil
}

// List returns the locks held in the store under this Mutex's prefix, by
// name. It fails with ErrNotSupported for stores that cannot enumerate their
// locks (advisory locks).
func (m *Mutex) List(ctx context.Context) ([]LockStatus, error) {
	m.mustBuilt()
	mustCtx(ctx)
	l, ok := m.drv.(drivers.Lister)
	if !ok {
		return nil, ErrNotSupported
	}
	locks, err := l.List(ctx, m.opts.Prefix)
	if errors.Is(err, ErrNotSupported) {
		return nil, ErrNotSupported
	}
	if err != nil {
		return nil, m.driverError("list", "", err)
	}
	out := make([]LockStatus, 0, len(locks))
	for _, ll := range locks {
		name, ok := strings.CutPrefix(ll.Key, m.opts.Prefix)
		if !ok {
			continue
		}
		out = append(out, status(name, ll.LockInfo))
	}
	slices.SortFunc(out, func(a, b LockStatus) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// ForceRelease frees the lock name whoever holds it, if the store tells its
// holder's token (expiring stores): the holder learns it lost the lock at
// its next renewal, and the fence still only grows. It reports whether a
// lock was released: false when name was free or changed holder meanwhile.
// It fails with ErrNotSupported for stores that do not tell the token of
// another process's lock (advisory locks).
func (m *Mutex) ForceRelease(ctx context.Context, name string) (bool, error) {
	m.mustBuilt()
	mustCtx(ctx)
	st, held, err := m.Inspect(ctx, name)
	if err != nil || !held {
		return false, err
	}
	return m.ForceReleaseHolder(ctx, st)
}

// ForceReleaseHolder is ForceRelease of the acquisition st shows (from
// Inspect or List of m): it frees the lock only while that holder still
// has it, in one store call, and reports false when the lock was released
// or went to another holder since st was read. An operator who confirms
// what was shown breaks that lock, never a later holder's.
func (m *Mutex) ForceReleaseHolder(ctx context.Context, st LockStatus) (bool, error) {
	m.mustBuilt()
	mustCtx(ctx)
	if st.token == "" {
		return false, ErrNotSupported
	}
	ok, err := m.drv.Release(ctx, m.opts.Prefix+st.Name, st.token)
	if err != nil {
		return false, m.driverError("release", st.Name, err)
	}
	return ok, nil
}

func status(name string, info drivers.LockInfo) LockStatus {
	h, ok := ParseHolder(info.Token)
	if info.Token == "" {
		h, ok = parseIdentity(info.Holder)
	}
	return LockStatus{Name: name, Holder: h, HolderKnown: ok, Fence: info.Fence, TTL: info.TTL, token: info.Token}
}
