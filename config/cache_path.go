package config

import (
	"os"

	"github.com/nxdnsd/nxdnsd/internal/safefile"
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
		what, target := safefile.Kind(path, fi.Mode())
		if target != "" {
			what = "leads through symlinks to " + target + ", " + what
		} else {
			what = "is " + what
		}
		ck.add("cache.path", "%q %s: the cache is saved to and read from a regular file only (a symlink to one is fine)", path, what)
	}
}
