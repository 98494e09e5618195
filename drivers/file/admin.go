//go:build linux || darwin || dragonfly || freebsd || openbsd || windows

package file

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/mutexfx/mutexfx/drivers"
)

var _ drivers.Lister = (*Driver)(nil)

// List returns the held locks whose keys start with prefix. A lock file's
// name keeps only part of its key (see fileName), so List finds the keys
// that the name gives back whole: prefix followed by ASCII letters, digits,
// '-' and '_', 60 bytes at most in all. Locks of other names are not listed
// (Inspect still sees them).
func (d *Driver) List(ctx context.Context, prefix string) ([]drivers.ListedLock, error) {
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(d.opts.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("mutexfx/file: list: %w", err)
	}
	stem := fileName(prefix)
	stem = stem[:strings.LastIndexByte(stem, '-')]
	if prefix == "" {
		stem = ""
	}
	buf := bufs.Get().(*[recMax]byte)
	defer bufs.Put(buf)
	var out []drivers.ListedLock
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return nil, context.Cause(ctx)
		}
		key, ok := listedKey(e.Name(), prefix, stem)
		if !ok {
			continue
		}
		info, held, err := d.inspectName(e.Name(), buf[:])
		if err != nil {
			return nil, fmt.Errorf("mutexfx/file: list: %s: %w", e.Name(), err)
		}
		if held {
			out = append(out, drivers.ListedLock{Key: key, LockInfo: info})
		}
	}
	return out, nil
}

// listedKey returns the key of the lock file name when it is prefix
// followed by the rest of the name's stem, as fileName would name it.
func listedKey(name, prefix, prefixStem string) (string, bool) {
	i := strings.LastIndexByte(name, '-')
	if i < 0 || !strings.HasSuffix(name, ".lock") || !strings.HasPrefix(name[:i], prefixStem) {
		return "", false
	}
	key := prefix + name[len(prefixStem):i]
	return key, fileName(key) == name
}

// inspectName is Inspect of the lock file name.
func (d *Driver) inspectName(name string, buf []byte) (drivers.LockInfo, bool, error) {
	path := d.path(name)
	fd, err := openReadOnly(path)
	if errors.Is(err, os.ErrNotExist) {
		return drivers.LockInfo{}, false, nil
	}
	if err != nil {
		return drivers.LockInfo{}, false, fmt.Errorf("open lock file: %w", err)
	}
	defer closeHandle(fd)
	return d.inspectFD(fd, path, buf)
}
