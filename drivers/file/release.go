//go:build linux || darwin || dragonfly || freebsd || openbsd || windows

package file

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
)

// Release frees key if token holds it and reports whether it did (false when
// the lock expired, was taken over or was already released, or when the
// holder's lock file was deleted or replaced, or its directory moved or
// removed: see Extend). The fence stays in the file. The holder's
// descriptor is closed in every case, even when the call fails, which frees
// the lock for other processes as a dead holder's.
// A ctx that has already ended still releases a lock held through this
// driver (the release is local and quick; the guard byte is then tried
// once); it fails only the release of a lock held elsewhere.
func (d *Driver) Release(ctx context.Context, key, token string) (bool, error) {
	if err := d.checkOpen(); err != nil {
		return false, err
	}
	buf := bufs.Get().(*[recMax]byte)
	defer bufs.Put(buf)
	var ok bool
	var err error
	if h := d.holderOf(key, token); h != nil {
		h.mu.Lock()
		if h.fd != noHandle {
			// A holder whose file was deleted or replaced, or whose
			// directory went, lost its lock (see Extend): the record of
			// its old file names it still, but another may hold the
			// lock at the path.
			var same bool
			if same, err = sameFile(h.fd, h.path); err == nil && same {
				ok, err = d.releaseLocked(ctx, h.fd, h.path, token, buf[:])
			} else if err == nil {
				d.lk.forgetLost(h.live, h.path, int64(h.fence)+1)
			}
			d.dropHolder(key, token, h)
			h.mu.Unlock()
			return d.released(key, ok, err)
		}
		h.mu.Unlock()
	}
	if err := ctx.Err(); err != nil {
		return false, context.Cause(ctx)
	}
	// Not held through this driver: another instance's token, or a stale
	// one. Work on a descriptor of our own.
	name := fileName(key)
	fd, err := d.open(name, false)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	ok, err = d.releaseLocked(ctx, fd, d.path(name), token, buf[:])
	_ = closeHandle(fd)
	return d.released(key, ok, err)
}

// released tells subscribers of this driver that key was released.
func (d *Driver) released(key string, ok bool, err error) (bool, error) {
	if ok && err == nil {
		d.emit(drivers.Event{Kind: drivers.Released, Key: key})
	}
	return ok, err
}

// releaseLocked clears the record of fd if token holds it. The guard byte is
// left locked: the caller closes fd.
func (d *Driver) releaseLocked(ctx context.Context, fd handle, path, token string, buf []byte) (bool, error) {
	if err := lockState(ctx, d.lk, fd, d.opts.BusyTimeout); err != nil {
		return false, err
	}
	var rec record
	if err := readRecord(d.lk, fd, buf, &rec); err != nil {
		return false, err
	}
	if !rec.held() || string(rec.token) != token {
		return false, nil
	}
	now, err := now()
	if err != nil {
		return false, err
	}
	// Clear the record even when it expired: nobody else took it, and a free
	// record reads better than an expired one.
	if err := writeRecord(d.lk, fd, buf, &record{fence: rec.fence}, ""); err != nil {
		return false, err
	}
	d.lk.forget(path, rec.liveOff)
	return rec.expiry > now, nil
}

// Extend sets key's expiry to ttl from now if token holds it and its ttl has
// not run out, and reports whether it did. A holder found gone has its
// descriptor closed.
func (d *Driver) Extend(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, context.Cause(ctx)
	}
	if ttl <= 0 {
		return false, fmt.Errorf("mutexfx/file: ttl %v must be positive", ttl)
	}
	if err := d.checkOpen(); err != nil {
		return false, err
	}
	buf := bufs.Get().(*[recMax]byte)
	defer bufs.Put(buf)
	return d.extend(ctx, key, token, ttl, buf[:])
}

func (d *Driver) extend(ctx context.Context, key, token string, ttl time.Duration, buf []byte) (bool, error) {
	if h := d.holderOf(key, token); h != nil {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.fd != noHandle {
			if same, err := sameFile(h.fd, h.path); err != nil || !same {
				if err == nil { // its file was deleted: held no more
					d.lk.forgetLost(h.live, h.path, int64(h.fence)+1)
					d.dropHolder(key, token, h)
				}
				return false, err
			}
			ok, expiry, err := d.extendLocked(ctx, h.fd, h.path, token, ttl, buf, false)
			if err == nil && !ok {
				d.dropHolder(key, token, h)
			}
			if ok {
				h.expiry.Store(expiry)
			}
			return ok, err
		}
	}
	name := fileName(key)
	fd, err := d.open(name, false)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer closeHandle(fd)
	ok, _, err := d.extendLocked(ctx, fd, d.path(name), token, ttl, buf, true)
	return ok, err
}

// extendLocked extends the record of fd if token holds it. With foreign (fd
// is not the holder's descriptor) it also checks that the holder's
// liveness lock is still held, so that it never extends a lock whose
// holder is gone.
// It returns the new expiry.
func (d *Driver) extendLocked(ctx context.Context, fd handle, path, token string, ttl time.Duration, buf []byte, foreign bool) (bool, int64, error) {
	if err := lockState(ctx, d.lk, fd, d.opts.BusyTimeout); err != nil {
		return false, 0, err
	}
	ok, expiry, err := d.extendRecord(fd, path, token, ttl, buf, foreign)
	if uerr := d.lk.unguard(fd); err == nil && uerr != nil {
		err = uerr
	}
	return ok && err == nil, expiry, err
}

func (d *Driver) extendRecord(fd handle, path, token string, ttl time.Duration, buf []byte, foreign bool) (bool, int64, error) {
	var rec record
	if err := readRecord(d.lk, fd, buf, &rec); err != nil {
		return false, 0, err
	}
	if !rec.held() || string(rec.token) != token {
		return false, 0, nil
	}
	now, err := now()
	if err != nil {
		return false, 0, err
	}
	if rec.expiry <= now {
		return false, 0, nil
	}
	if foreign {
		alive, err := d.lk.alive(fd, path, rec.liveOff)
		if err != nil || !alive {
			return false, 0, err
		}
	}
	rec.expiry = addTTL(now, ttl)
	if err := writeRecord(d.lk, fd, buf, &rec, token); err != nil {
		return false, 0, err
	}
	return true, rec.expiry, nil
}

// Renew extends every lease in order, returning one result per lease. Each
// lease costs four system calls on the descriptor its holder keeps open; a
// ctx that ends fails the leases not yet renewed.
func (d *Driver) Renew(ctx context.Context, leases []drivers.Lease) []drivers.RenewResult {
	if err := d.checkOpen(); err != nil {
		return drivers.RenewFailed(len(leases), err)
	}
	out := make([]drivers.RenewResult, len(leases))
	buf := bufs.Get().(*[recMax]byte)
	defer bufs.Put(buf)
	for i, l := range leases {
		if err := ctx.Err(); err != nil {
			out[i].Err = context.Cause(ctx)
			continue
		}
		if l.TTL <= 0 {
			out[i].Err = fmt.Errorf("mutexfx/file: ttl %v must be positive", l.TTL)
			continue
		}
		out[i].Held, out[i].Err = d.extend(ctx, l.Key, l.Token, l.TTL, buf[:])
	}
	return out
}

// Inspect returns key's holder, fence and remaining ttl, or ok false when
// the lock is free, expired or its holder is dead. It reads without taking
// the guard byte, on a read-only descriptor, and creates nothing.
func (d *Driver) Inspect(ctx context.Context, key string) (drivers.LockInfo, bool, error) {
	if err := ctx.Err(); err != nil {
		return drivers.LockInfo{}, false, context.Cause(ctx)
	}
	if err := d.checkOpen(); err != nil {
		return drivers.LockInfo{}, false, err
	}
	path := d.path(fileName(key))
	fd, err := openReadOnly(path)
	if errors.Is(err, fs.ErrNotExist) {
		return drivers.LockInfo{}, false, nil
	}
	if err != nil {
		return drivers.LockInfo{}, false, fmt.Errorf("open lock file: %w", err)
	}
	defer closeHandle(fd)
	buf := bufs.Get().(*[recMax]byte)
	defer bufs.Put(buf)
	return d.inspectFD(fd, path, buf[:])
}

// inspectFD reads the record of the lock file at path, open at fd, without
// the guard. A record torn by a concurrent write is read again, a few times,
// after guardBackoff's delays.
func (d *Driver) inspectFD(fd handle, path string, buf []byte) (drivers.LockInfo, bool, error) {
	var rec record
	var err error
	retry := guardBackoff.New()
	for range 8 {
		if err = readRecord(d.lk, fd, buf, &rec); !errors.Is(err, ErrCorrupt) {
			break
		}
		time.Sleep(retry.Next())
	}
	if err != nil {
		return drivers.LockInfo{}, false, err
	}
	now, err := now()
	if err != nil || !rec.held() || rec.expiry <= now {
		return drivers.LockInfo{}, false, err
	}
	alive, err := d.lk.alive(fd, path, rec.liveOff)
	if err != nil || !alive {
		return drivers.LockInfo{}, false, err
	}
	return drivers.LockInfo{Token: string(rec.token), Fence: rec.fence, TTL: remaining(rec.expiry, now)}, true, nil
}
