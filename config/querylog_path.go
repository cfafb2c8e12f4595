package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// queryLogPath checks query_log.path: a file that can be opened for
// appending, so that a mistake is the check's error, at query_log.path,
// instead of an exit at start-up that systemd restarts every 2 s. An
// existing file must be writable; a missing one needs a writable directory
// to be created in. "" (off) and "-" (stdout) need nothing.
func (ck *checker) queryLogPath(path string) {
	const key = "query_log.path"
	if path == "" || path == "-" {
		return
	}
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.IsDir():
		ck.add(key, "%q is a directory; name a file in it", path)
		return
	case err == nil:
		if err := writable(path); err != nil {
			ck.add(key, "%q is not writable: %v", path, err)
		}
		return
	case !errors.Is(err, fs.ErrNotExist):
		ck.add(key, "%q: %v", path, err)
		return
	}
	dir := filepath.Dir(path)
	fi, err = os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		ck.add(key, "%q: directory %q does not exist", path, dir)
	case err != nil:
		ck.add(key, "%q: %v", path, err)
	case !fi.IsDir():
		ck.add(key, "%q: %q is not a directory", path, dir)
	default:
		if err := writable(dir); err != nil {
			ck.add(key, "%q: directory %q is not writable, so the file cannot be created: %v", path, dir, err)
		}
	}
}
