package config

import (
	"os"
	"path/filepath"
)

// cachePath checks cache.path. Its directory may not exist yet: systemd's
// StateDirectory creates it when the service starts, after a -check. What
// is there already must be a regular file (after following symlinks), or
// start-up would refuse to read it and shutdown would replace it: a
// directory, a FIFO, a device is refused here. Anything else (a file that
// cannot be read or written) is start-up's and shutdown's to report (see
// daemon/cache.go).
func (ck *checker) cachePath(path string) {
	if path == "" {
		return
	}
	fi, err := os.Stat(path)
	switch {
	case err != nil || fi.Mode().IsRegular():
	case fi.IsDir():
		ck.add("cache.path", "%q is a directory: name a file in it", path)
	default:
		what := fileKind(fi.Mode())
		if target, err := filepath.EvalSymlinks(path); err == nil && target != filepath.Clean(path) {
			what = "leads through symlinks to " + target + ", " + what
		} else {
			what = "is " + what
		}
		ck.add("cache.path", "%q %s: the cache is saved to and read from a regular file only (a symlink to one is fine)", path, what)
	}
}

// fileKind names a mode that is neither a regular file's nor a
// directory's.
func fileKind(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a FIFO (named pipe)"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a block device"
	case m&os.ModeSocket != 0:
		return "a socket"
	default:
		return "not a regular file"
	}
}
