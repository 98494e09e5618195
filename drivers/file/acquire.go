//go:build linux || darwin || dragonfly || freebsd || openbsd || windows

package file

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
)

// bufs holds record buffers, so that calls allocate little.
var bufs = sync.Pool{New: func() any { return new([recMax]byte) }}

// Acquire makes one attempt to take req.Key for req.Token, for req.TTL.
//
// Under the file's guard it reads the record; the lock is free when the
// record names no holder, when the holder's expiry has passed, or when the
// holder's liveness lock is not held (its process died or its driver was
// closed). Taking it grants fence+1, takes the liveness lock 1+fence on a
// descriptor kept open until release, and writes the record.
func (d *Driver) Acquire(ctx context.Context, req drivers.AcquireRequest) (drivers.AcquireResult, error) {
	if err := ctx.Err(); err != nil {
		return drivers.AcquireResult{}, context.Cause(ctx)
	}
	if err := checkToken(req.Token); err != nil {
		return drivers.AcquireResult{}, err
	}
	if req.TTL <= 0 {
		return drivers.AcquireResult{}, fmt.Errorf("mutexfx/file: ttl %v must be positive", req.TTL)
	}
	if err := d.checkOpen(); err != nil {
		return drivers.AcquireResult{}, err
	}
	buf := bufs.Get().(*[recMax]byte)
	defer bufs.Put(buf)

	name := fileName(req.Key)
	if d.recentlyBusy(name) {
		// Look without opening for writing first: closing a descriptor open
		// for writing wakes every waiter watching the directory, and waiters
		// retrying on a wake-up must not wake each other in a loop.
		if ttl, busy, err := d.peekBusy(name, buf[:]); err != nil {
			return drivers.AcquireResult{}, err
		} else if busy {
			d.markBusy(name, req.Key)
			return drivers.AcquireResult{HolderTTL: ttl}, nil
		}
	}

	var res drivers.AcquireResult
	for attempt := 1; ; attempt++ {
		fd, err := d.open(name, true)
		if err != nil {
			return drivers.AcquireResult{}, err
		}
		var keep bool
		res, keep, err = d.acquireLocked(ctx, fd, name, req, buf[:])
		if !keep {
			_ = closeHandle(fd) // also drops the guard
		}
		if errors.Is(err, errReplaced) && attempt < 3 {
			continue // the file was deleted or replaced as it was opened: open the new one
		}
		if err != nil {
			return drivers.AcquireResult{}, err
		}
		break
	}
	if !res.Acquired {
		d.markBusy(name, req.Key)
		// The watcher reports only names marked busy: a release between
		// the read and markBusy made no event. While someone listens,
		// look once more, the name now marked (and watched), and report
		// one found so.
		if d.subs.Len() == 0 {
			return res, nil
		}
		if _, busy, err := d.peekBusy(name, buf[:]); err == nil && !busy {
			d.emit(drivers.Event{Kind: drivers.Released, Key: req.Key})
		}
	}
	return res, nil
}

// acquireLocked does the acquisition on the open lock file fd. keep reports
// that fd now belongs to a holder and must stay open.
func (d *Driver) acquireLocked(ctx context.Context, fd handle, name string, req drivers.AcquireRequest, buf []byte) (res drivers.AcquireResult, keep bool, err error) {
	if err := lockState(ctx, d.lk, fd, d.opts.BusyTimeout); err != nil {
		return res, false, err
	}
	if ok, _, err := linked(fd); err != nil || !ok {
		return res, false, cmp.Or(err, errReplaced)
	}
	var rec record
	if err := readRecord(d.lk, fd, buf, &rec); err != nil {
		return res, false, err
	}
	now, err := now()
	if err != nil {
		return res, false, err
	}
	path := d.path(name)
	if rec.held() && rec.expiry > now {
		alive, err := d.lk.alive(fd, path, rec.liveOff)
		if err != nil {
			return res, false, err
		}
		if alive {
			return drivers.AcquireResult{HolderTTL: remaining(rec.expiry, now)}, false, nil
		}
	}
	if rec.fence >= maxFence {
		return res, false, fmt.Errorf("mutexfx/file: fence exhausted")
	}
	if rec.held() {
		d.lk.forget(path, rec.liveOff) // its holder is dead or expired
	}
	fence, first := nextFence(rec.fence), rec.fence == 0 // first: the file may have just been created
	live := int64(fence) + 1
	h := &holder{fd: fd, live: noHandle, fence: fence, path: path}
	if h.live, err = d.lk.hold(fd, path, live); err != nil {
		return res, false, err
	}
	// drop undoes the liveness lock when the lock is not kept (the caller
	// closes fd): other processes then see its holder dead.
	drop := func() {
		if h.live != noHandle {
			_ = closeHandle(h.live)
			d.lk.forget(path, live)
		}
	}
	if err := d.publish(fd, buf, req, h, first); err != nil {
		drop()
		return res, false, err
	}
	if !d.addHolder(req.Key, req.Token, h) { // closed meanwhile
		drop()
		return res, false, ErrClosed
	}
	return drivers.AcquireResult{Acquired: true, Fence: fence}, true, nil
}

// publish writes the record naming the new holder h (its liveness lock
// taken) and leaves the guard. The ttl runs from now, after the liveness
// lock was taken (with flock, a file created, which a busy disk may delay).
func (d *Driver) publish(fd handle, buf []byte, req drivers.AcquireRequest, h *holder, first bool) error {
	now, err := now()
	if err != nil {
		return err
	}
	rec := record{fence: h.fence, expiry: addTTL(now, req.TTL), liveOff: int64(h.fence) + 1, pid: d.pid}
	if err := writeRecord(d.lk, fd, buf, &rec, req.Token); err != nil {
		return err
	}
	if d.opts.Sync {
		if err := d.sync(fd, first); err != nil {
			return err
		}
	}
	if err := d.lk.unguard(fd); err != nil {
		return err
	}
	h.expiry.Store(rec.expiry)
	return nil
}

// peekBusy reads the record of lock file name without the guard byte (on a read-only
// descriptor) and reports whether a live holder has it and for how long.
// A record torn by a concurrent write fails its checksum and is read again;
// a wrong "not busy" only costs the full locked attempt.
func (d *Driver) peekBusy(name string, buf []byte) (ttl time.Duration, busy bool, err error) {
	path := d.path(name)
	fd, err := openReadOnly(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("open lock file: %w", err)
	}
	defer closeHandle(fd)
	info, held, err := d.inspectFD(fd, path, buf)
	if err != nil || !held {
		return 0, false, nil // let the locked attempt decide (and report)
	}
	return info.TTL, true, nil
}

// sync flushes the lock file's record to disk and, for a file's first
// acquisition (the file may have just been created), the directory entry.
func (d *Driver) sync(fd handle, first bool) error {
	if err := fdatasync(fd); err != nil {
		return fmt.Errorf("fdatasync lock file: %w", err)
	}
	if !first {
		return nil
	}
	return syncDir(d.opts.Dir)
}
