//go:build linux || darwin || dragonfly || freebsd || openbsd || windows

package file

import (
	"errors"
	"fmt"
	"io/fs"
	"time"
)

// errReplaced: the lock file opened is no longer the file at its path.
var errReplaced = errors.New("mutexfx/file: lock file deleted or replaced")

// fileID is what the checks below read of a file: its type, its links,
// and its identity.
type fileID struct {
	regular  bool
	links    uint32
	dev, ino uint64
}

// linked reports whether fd is a regular file still linked in a directory:
// not deleted, not replaced (renamed over: the old file is unlinked). A
// holder whose file was deleted holds nothing any more: the next Acquire
// creates a new file at the path and takes it. One system call: the check
// an acquisition makes (on the file it just opened and locked).
func linked(fd handle) (bool, fileID, error) {
	id, err := statFD(fd)
	if err != nil {
		return false, id, fmt.Errorf("stat lock file: %w", err)
	}
	if !id.regular {
		return false, id, errors.New("lock file: not a regular file")
	}
	return id.links > 0, id, nil
}

// sameFile reports whether fd is still the regular file at path: linked,
// and its directory not moved either (two system calls: the check of the
// renewals, which run every ttl/3, not of the acquisitions).
func sameFile(fd handle, path string) (bool, error) {
	ok, open, err := linked(fd)
	if err != nil || !ok {
		return false, err
	}
	named, err := statPath(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || isNotDir(err) {
			return false, nil
		}
		return false, fmt.Errorf("stat lock file: %w", err)
	}
	return open.dev == named.dev && open.ino == named.ino, nil
}

// nextFence is the fence granted after last: last+1, or, for a file that
// has granted none (new, or created anew after it was deleted), the wall
// clock in microseconds. A name's fences then keep growing when its file is
// lost (deleted, or a damaged file removed), as long as the clock has not
// gone back since, as the Redis driver's counter does when its key is lost.
func nextFence(last uint64) uint64 {
	if last > 0 {
		return last + 1
	}
	return uint64(max(time.Now().UnixMicro(), 1))
}
