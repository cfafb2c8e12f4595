package clients

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"time"

	"go.uber.org/zap"

	"github.com/nxdnsd/nxdnsd/internal/safefile"
)

// file is one hosts or leases file and what its last read gave. Guarded
// by Directory.mu.
type file struct {
	path   string
	parse  func([]byte) parsed
	parsed parsed

	seen    os.FileInfo // the stat of the last read; nil when the file was missing
	problem string      // the last read's error as logged, "" none: each is logged once
}

// reuse returns the files of paths, keeping the ones of old with the
// same path (and so their logged state).
func (d *Directory) reuse(old []*file, paths []string, parse func([]byte) parsed) []*file {
	byPath := make(map[string]*file, len(old))
	for _, f := range old {
		byPath[f.path] = f
	}
	out := make([]*file, 0, len(paths))
	for _, p := range paths {
		f := byPath[p]
		if f == nil {
			f = &file{path: p, parse: parse}
		}
		out = append(out, f)
	}
	return out
}

// watch stats the files every PollInterval and reads those that changed;
// it also builds the table again when a lease in it ends. It runs until
// ctx is done.
func (d *Directory) watch(ctx context.Context) {
	defer d.wg.Done()
	tick := time.NewTicker(d.opts.PollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if d.poll() {
				d.changed()
			}
		}
	}
}

// poll reads the files that changed since their last read and builds the
// table again if one did or a lease ended, and reports whether it did.
func (d *Directory) poll() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	dirty := false
	for _, f := range append(append([]*file(nil), d.hosts...), d.leases...) {
		if f.changed() {
			d.read(f)
			dirty = true
		}
	}
	if next := d.tab.Load().next; !dirty && (next.IsZero() || d.opts.Now().Before(next)) {
		return false
	}
	d.rebuildLocked()
	return true
}

// changed reports whether f's stat differs from its last read's: it
// appeared, went, or its identity, size or modification time changed.
func (f *file) changed() bool {
	fi, err := os.Stat(f.path)
	switch {
	case err != nil:
		return f.seen != nil || f.problem == "" // went away, or a first failure to log
	case f.seen == nil:
		return true
	}
	return !os.SameFile(fi, f.seen) || fi.Size() != f.seen.Size() || !fi.ModTime().Equal(f.seen.ModTime())
}

// read reads f again, logging a missing or unreadable file once (until
// it is read again) and the bad lines of every read.
func (d *Directory) read(f *file) {
	fi, err := os.Stat(f.path)
	var data []byte
	if err == nil {
		data, err = safefile.ReadFile(f.path, MaxFileBytes)
	}
	if err != nil {
		// A file that is there but unreadable (a FIFO, too large) is
		// read again only when its stat changes.
		f.seen, f.parsed = nil, parsed{}
		if fi != nil && !errors.Is(err, fs.ErrNotExist) {
			f.seen = fi
		}
		msg := err.Error()
		if errors.Is(err, fs.ErrNotExist) {
			msg = "missing"
		}
		if msg != f.problem {
			f.problem = msg
			if msg == "missing" {
				d.log.Warn("clients: file missing; its names are ignored until it appears", zap.String("path", f.path))
			} else {
				d.log.Warn("clients: file unreadable; its names are ignored", zap.String("path", f.path), zap.Error(err))
			}
		}
		return
	}
	f.seen, f.problem = fi, ""
	f.parsed = f.parse(data)
	if f.parsed.bad > 0 {
		d.badLines.Add(uint64(f.parsed.bad))
		d.log.Warn("clients: malformed lines skipped", zap.String("path", f.path),
			zap.Int("lines", f.parsed.bad), zap.Int("first", f.parsed.firstBad))
	}
	d.log.Debug("clients: file read", zap.String("path", f.path), zap.Int("names", len(f.parsed.bindings)))
}

// rebuildLocked publishes the table of the current configuration and
// files, as of now. d.mu is held.
func (d *Directory) rebuildLocked() {
	d.tab.Store(build(d.cfg.Static, d.hosts, d.leases, d.opts.Now()))
}
