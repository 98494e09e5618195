// Package file is the mutexfx driver keeping locks in a directory of lock
// files, shared by the processes of one host (Linux, macOS, FreeBSD, OpenBSD,
// DragonFly; Windows, cross-compiled but not tested).
//
// Each lock name maps to one small file in the directory. A holder keeps a
// kernel lock of its open file description for as long as it holds the lock
// (see Mechanism: an OFD byte-range lock on Linux, flock(2) on macOS and the
// BSDs, LockFileEx on Windows), so a lock whose holder process died (even by
// kill -9) is taken over at once; a holder that is alive but hung loses its lock when its
// ttl, stored in the file, runs out. The file also stores a fencing token that
// grows with every acquisition of the name and is never reset. Lock files are
// never deleted (deleting a file another process has open would split the
// lock in two); the directory holds one file of about 100 bytes per name ever
// used.
//
// Expiries use the host's monotonic clock (CLOCK_MONOTONIC; CLOCK_UPTIME_RAW
// on macOS), which every process of the host shares and which a wall-clock
// step does not move. Processes sharing a directory must therefore run on
// the same host (and in the same Linux time namespace), on a local file
// system (not NFS), with the same Mechanism.
package file

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/mutexfx/mutexfx/config"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/kit"
)

// Type is the driver's name in configuration (driver.type).
const Type = "file"

// Default option values.
const (
	// DefaultDirMode is the permission of the lock directory when the
	// driver creates it.
	DefaultDirMode fs.FileMode = 0o700
	// DefaultFileMode is the permission of the lock files the driver creates.
	DefaultFileMode fs.FileMode = 0o600
	// DefaultBusyTimeout bounds the wait for another process's critical
	// section on a lock file.
	DefaultBusyTimeout = time.Second
	// MaxTokenLen is the longest holder token the driver stores, in bytes.
	MaxTokenLen = 1024
)

// ErrOptions matches every invalid option New or Factory reports: it is
// drivers.ErrOptions, and the error is a *drivers.OptionsError naming the
// option's configuration key.
var ErrOptions = drivers.ErrOptions

// ErrClosed is returned by calls on a closed Driver: it is drivers.ErrClosed.
var ErrClosed = drivers.ErrClosed

// ErrUnsupported is returned by New on operating systems without the
// driver's locks: those other than Linux, macOS, the BSDs and Windows.
var ErrUnsupported = errors.New("mutexfx/file: the file driver needs Linux, macOS, a BSD or Windows")

// ErrMechanism reports a lock held through another Mechanism, whose locks
// this driver's do not see: every process sharing a directory must use the
// same one. Drivers of two mechanisms never both hold a lock: on Linux the
// guard of MechanismFlock also takes that of MechanismOFD, so of two
// taking a free lock at once, the second finds the first's record and
// fails with ErrMechanism.
var ErrMechanism = errors.New("mutexfx/file: lock file written with another mechanism")

// Mechanism is the kernel lock a driver uses (Options.Mechanism).
type Mechanism string

// The mechanisms. Each is a lock of open file descriptions, released by the
// kernel when its holder's process dies; the locks of one do not see those
// of another (see ErrMechanism).
const (
	// MechanismOFD: open-file-description byte-range locks (fcntl
	// F_OFD_SETLK), Linux only; one descriptor per held lock. The default
	// on Linux.
	MechanismOFD Mechanism = "ofd"
	// MechanismFlock: flock(2) whole-file locks, on Linux, macOS and the
	// BSDs; each held lock keeps a second, liveness file open (two
	// descriptors per held lock). The default on macOS and the BSDs.
	MechanismFlock Mechanism = "flock"
	// MechanismLockFile: LockFileEx byte-range locks of a file handle,
	// Windows only, where they are the default; one handle per held lock.
	MechanismLockFile Mechanism = "lockfile"
)

// ErrCorrupt reports a lock file whose content is not a valid lock record.
// It happens only if something other than this driver wrote to the file, or
// after a power loss tore a write. Stop every process using the directory,
// then delete the file (its fences continue from the clock).
var ErrCorrupt = errors.New("mutexfx/file: corrupt lock file")

// ErrBusy reports that another process stayed inside the short critical
// section of a lock file for longer than Options.BusyTimeout (it is probably
// stopped or hung in the middle of an operation).
var ErrBusy = errors.New("mutexfx/file: lock file busy")

// Options configure a Driver. The koanf tags name the configuration keys
// Factory reads (where the modes may also be octal strings).
type Options struct {
	// Dir is the directory holding the lock files. Required. Every process
	// sharing the locks uses the same directory, on a local file system of
	// one host. It is created (with its parents) on first use when missing.
	// For fences that keep growing across reboots, use a persistent file
	// system (not a tmpfs such as /run or, on many systems, /tmp). A
	// relative Dir is taken from the working directory when New is called.
	Dir string `koanf:"dir"`

	// DirMode is the permission of Dir when the driver creates it, before
	// the umask. Default 0o700 (DefaultDirMode): only the same user can use
	// the locks. Use 0o770 with a setgid directory, and a FileMode of
	// 0o660, to share among a group.
	DirMode fs.FileMode `koanf:"dirMode"`

	// FileMode is the permission of the lock files the driver creates,
	// before the umask. Default 0o600 (DefaultFileMode).
	FileMode fs.FileMode `koanf:"fileMode"`

	// BusyTimeout is how long a call waits for another process to leave
	// the few-microsecond critical section that guards a lock file's
	// record, before failing with ErrBusy. It only matters when a process
	// is stopped or hung inside that section. Default 1 s
	// (DefaultBusyTimeout). The call's ctx also ends the wait.
	BusyTimeout time.Duration `koanf:"busyTimeout"`

	// Sync makes every acquisition fdatasync the lock file before it
	// returns, so that fences keep growing even after a power loss or a
	// kernel crash. It costs a disk flush per acquisition. Default false:
	// fences are monotonic as long as the host does not crash.
	Sync bool `koanf:"sync"`

	// Mechanism is the kernel lock used: MechanismOFD ("ofd", Linux only),
	// MechanismFlock ("flock", Linux, macOS, BSDs) or MechanismLockFile
	// ("lockfile", Windows only). Default: "ofd" on Linux, "lockfile" on
	// Windows, "flock" elsewhere. Every process sharing Dir must use the
	// same mechanism; a lock held with another fails with ErrMechanism.
	Mechanism Mechanism `koanf:"mechanism"`
}

// withDefaults returns o with defaults filled in, or a *drivers.OptionsError
// naming the invalid option's configuration key.
func (o Options) withDefaults() (Options, error) {
	if o.Dir == "" {
		return o, drivers.OptionErrorf("dir", "required")
	}
	// made absolute now: a process that changes its working directory
	// later keeps its locks
	abs, err := filepath.Abs(o.Dir)
	if err != nil {
		return o, drivers.OptionErrorf("dir", "%w", err)
	}
	o.Dir = abs
	if o.DirMode == 0 {
		o.DirMode = DefaultDirMode
	}
	if o.FileMode == 0 {
		o.FileMode = DefaultFileMode
	}
	if o.DirMode&^fs.ModePerm != 0 {
		return o, drivers.OptionErrorf("dirMode", "only permission bits are allowed")
	}
	if o.FileMode&^fs.ModePerm != 0 {
		return o, drivers.OptionErrorf("fileMode", "only permission bits are allowed")
	}
	if o.BusyTimeout == 0 {
		o.BusyTimeout = DefaultBusyTimeout
	}
	if o.BusyTimeout < 0 {
		return o, drivers.OptionErrorf("busyTimeout", "must be positive")
	}
	if o.Mechanism == "" {
		o.Mechanism = defaultMechanism
	}
	switch o.Mechanism {
	case MechanismOFD, MechanismFlock, MechanismLockFile:
		if !supported(o.Mechanism) {
			return o, drivers.OptionErrorf("mechanism", "%q is not available on %s: use %q", o.Mechanism, runtime.GOOS, defaultMechanism)
		}
	default:
		return o, drivers.OptionErrorf("mechanism", `unknown mechanism %q: use "ofd" or "flock"`, o.Mechanism)
	}
	return o, nil
}

// fileConfig is the configuration block of the driver (driver.type: file).
type fileConfig struct {
	Dir         string        `koanf:"dir"`
	DirMode     any           `koanf:"dirMode"`
	FileMode    any           `koanf:"fileMode"`
	BusyTimeout time.Duration `koanf:"busyTimeout"`
	Sync        bool          `koanf:"sync"`
	Mechanism   Mechanism     `koanf:"mechanism"`
}

// Factory returns the factory building file drivers from configuration:
//
//	driver:
//	  type: file
//	  dir: /var/lib/myapp/locks   # required
//	  dirMode: "0700"             # octal string or the mode's number, default 0700
//	  fileMode: "0600"            # octal string or the mode's number, default 0600
//	  busyTimeout: 1s             # Go duration or integer milliseconds
//	  sync: false
//	  mechanism: ofd              # ofd (Linux), flock (Unix) or lockfile (Windows); default per OS
//
// Unknown keys are errors naming their full key path. The driver does not use
// an existing client (driver.client is not supported).
func Factory() drivers.Factory {
	return drivers.Factory{
		Type:       Type,
		ClientType: nil,
		New: func(spec drivers.Spec) (drivers.Driver, error) {
			opts, err := optionsFromSpec(spec)
			if err != nil {
				return nil, err
			}
			return New(opts)
		},
	}
}

// optionsFromSpec decodes and validates a configuration block, naming the
// full key path in errors.
func optionsFromSpec(spec drivers.Spec) (Options, error) {
	if spec.Client != nil {
		return Options{}, config.Errorf(config.Join(spec.Path, "client"), "the file driver uses no client")
	}
	var cfg fileConfig
	if err := config.Decode(spec.Path, spec.Options, &cfg); err != nil {
		return Options{}, err
	}
	opts := Options{Dir: cfg.Dir, BusyTimeout: cfg.BusyTimeout, Sync: cfg.Sync, Mechanism: cfg.Mechanism}
	var err error
	if opts.DirMode, err = parseMode(cfg.DirMode); err != nil {
		return Options{}, config.Errorf(config.Join(spec.Path, "dirMode"), "%v", err)
	}
	if opts.FileMode, err = parseMode(cfg.FileMode); err != nil {
		return Options{}, config.Errorf(config.Join(spec.Path, "fileMode"), "%v", err)
	}
	if _, err := opts.withDefaults(); err != nil {
		return Options{}, kit.SpecError(spec.Path, err)
	}
	return opts, nil
}

// parseMode reads a permission from configuration: a string is octal ("0700",
// "700", "0o700"); a number is the mode's value (YAML's 0700 and TOML's 0o700
// are both 448). Nil or "" is zero (the default).
func parseMode(v any) (fs.FileMode, error) {
	switch x := v.(type) {
	case nil:
		return 0, nil
	case string:
		s := strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(x), "0o"), "0O")
		if s == "" {
			return 0, nil
		}
		n, err := strconv.ParseUint(s, 8, 32)
		if err != nil || n&^uint64(fs.ModePerm) != 0 {
			return 0, fmt.Errorf("invalid mode %q: use octal permission bits such as \"0700\"", x)
		}
		return fs.FileMode(n), nil
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		n, err := strconv.ParseInt(fmt.Sprint(x), 10, 64)
		if err != nil || n < 0 || n&^int64(fs.ModePerm) != 0 {
			return 0, fmt.Errorf("invalid mode %v: only permission bits (0 to 0777) are allowed", x)
		}
		return fs.FileMode(n), nil
	default:
		return 0, fmt.Errorf("invalid mode of type %T: use an octal string such as \"0700\"", v)
	}
}
