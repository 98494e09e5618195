package file

import (
	"errors"

	"golang.org/x/sys/unix"
)

// statID reads the fileID of the file open at fd (path "", AT_EMPTY_PATH)
// or at path. It asks statx for no timestamp: a stat that reads them makes
// the file system (ext4, xfs, tmpfs since Linux 6.13) give the file's next
// write a fine-grained timestamp, an inode update that tripled the cost of
// the record's write here.
func statID(fd int, path string) (fileID, error) {
	flags := unix.AT_SYMLINK_NOFOLLOW
	if path == "" {
		flags |= unix.AT_EMPTY_PATH
	}
	var x unix.Statx_t
	err := unix.Statx(fd, path, flags, unix.STATX_TYPE|unix.STATX_NLINK|unix.STATX_INO, &x)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) { // before Linux 4.11; old seccomp profiles
		var st unix.Stat_t
		if path == "" {
			err = unix.Fstat(fd, &st)
		} else {
			err = unix.Lstat(path, &st)
		}
		return fileID{st.Mode&unix.S_IFMT == unix.S_IFREG, uint32(st.Nlink), uint64(st.Dev), st.Ino}, err
	}
	return fileID{uint32(x.Mode)&unix.S_IFMT == unix.S_IFREG, x.Nlink, unix.Mkdev(x.Dev_major, x.Dev_minor), x.Ino}, err
}

// fdatasync flushes the data of the file open at fd.
func fdatasync(fd int) error { return unix.Fdatasync(fd) }
