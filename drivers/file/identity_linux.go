//go:build linux

package file

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// errReplaced: the lock file opened is no longer the file at its path.
var errReplaced = errors.New("mutexfx/file: lock file deleted or replaced")

// sameFile reports whether fd is still the regular file at path: not
// deleted, not replaced (renamed over), its directory not moved. A holder
// whose file was deleted holds nothing any more: the next Acquire creates a
// new file at the path and takes it.
func sameFile(fd int, path string) (bool, error) {
	var open, named unix.Stat_t
	if err := unix.Fstat(fd, &open); err != nil {
		return false, fmt.Errorf("stat lock file: %w", err)
	}
	if open.Mode&unix.S_IFMT != unix.S_IFREG {
		return false, fmt.Errorf("lock file %s: not a regular file", path)
	}
	if open.Nlink == 0 {
		return false, nil
	}
	if err := unix.Lstat(path, &named); err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			return false, nil
		}
		return false, fmt.Errorf("stat lock file: %w", err)
	}
	return open.Dev == named.Dev && open.Ino == named.Ino, nil
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
