package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// warningPrefix starts the message of every warning, so that its line
// reads "config: PATH: warning: message" beside the problems' lines.
const warningPrefix = "warning: "

// Warnings returns what is valid in c but will not work as written on this
// machine now, each named by its TOML path, its message starting with
// "warning: ": `nxdnsd -check` prints them and exits 0, and the start-up
// log repeats them. None is an error, because what they depend on may
// appear between the check and the start: systemd's StateDirectory=
// creates /var/lib/nxdnsd only when the service starts.
func (c *Config) Warnings() Problems {
	var ws Problems
	warn := func(path, msg string) {
		ws = append(ws, Problem{Path: path, Message: oneLine(warningPrefix + msg)})
	}
	if c.Cache.Enabled && c.Cache.Path != "" {
		if msg := cacheDirProblem(c.Cache.Path); msg != "" {
			warn("cache.path", msg)
		}
	}
	if msg := certificateWarning(c.Server.Certificate, time.Now()); msg != "" {
		warn("server.cert_file", msg)
	}
	ws = append(ws, c.adminAuthWarnings()...)
	ws = append(ws, c.bootstrapWarnings()...)
	ws = append(ws, c.rebindWarnings()...)
	return append(ws, c.Clients.fileWarnings()...)
}

// cacheDirProblem says why the cache could not be saved in the directory
// of path, or returns "". Only what is certain is said: a directory that
// exists but may not be writable by the service's user is left to the
// shutdown's log.
func cacheDirProblem(path string) string {
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("the directory %q does not exist: the cache would not be saved at shutdown "+
			"(create it, or let systemd's StateDirectory=nxdnsd make /var/lib/nxdnsd when the service starts)", dir)
	case err != nil:
		return fmt.Sprintf("the directory %q cannot be read: %v", dir, err)
	case !fi.IsDir():
		return fmt.Sprintf("%q is not a directory: the cache would not be saved at shutdown", dir)
	}
	return ""
}
