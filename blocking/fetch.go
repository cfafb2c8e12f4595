package blocking

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"time"

	"go.uber.org/zap"

	"github.com/nxdnsd/nxdnsd/config"
)

// newHTTPClient is the client of every download: no proxy from the
// environment, gzip accepted (and undone by the transport), at most
// MaxRedirects redirects, the list hosts dialled through dial.
func newHTTPClient(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Client {
	if dial == nil {
		dial = dialLiteral
	}
	t := &http.Transport{
		Proxy:                 nil,
		DialContext:           dial,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          4,
		IdleConnTimeout:       30 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: FetchTimeout,
	}
	return &http.Client{
		Transport: t,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > MaxRedirects {
				return fmt.Errorf("%w (more than %d)", errTooManyRedirects, MaxRedirects)
			}
			return nil
		},
	}
}

var errTooManyRedirects = errors.New("too many redirects")

// dialLiteral dials IP literals only: without the daemon's dialer there is
// no resolver that may be used (never the system's).
func dialLiteral(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if _, err := netip.ParseAddr(host); err != nil {
		return nil, fmt.Errorf("resolving %q: no resolver for list hosts was given", host)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// errTooLarge, errTooFew: why a body was refused.
var (
	errTooLarge = errors.New("body over blocking.max_list_mib")
	errTooFew   = errors.New("too few rules")
)

// fetch fetches (or reads) l once and records the outcome: a new copy in
// force, unchanged, or a failure that keeps the copy in force.
func (m *Manager) fetch(ctx context.Context, l *list) {
	m.mu.Lock()
	cfg := m.cfg
	etag, lastModified := l.etag, l.lastModified
	hint := 0
	oldRules := 0
	if l.set != nil {
		hint, oldRules = l.set.rules-len(l.set.regexps), l.set.rules
	}
	refused, hasRefused := l.refused, l.hasRefused
	m.mu.Unlock()

	maxBytes := int64(cfg.MaxListMiB) << 20
	var (
		body     io.ReadCloser
		err      error
		meta     copyMeta
		notMod   bool
		tempPath string
	)
	if l.cfg.IsURL() {
		ctx, cancel := context.WithTimeout(ctx, FetchTimeout)
		defer cancel()
		body, meta, notMod, err = m.get(ctx, l.cfg.Source, etag, lastModified)
	} else {
		body, err = os.Open(l.cfg.Source)
	}
	var s *set
	var sum [32]byte
	if err == nil && !notMod {
		var copyFile *os.File
		if l.cfg.IsURL() && cfg.StateDir != "" {
			var terr error
			if copyFile, tempPath, terr = createTemp(cfg.StateDir); terr != nil {
				// The list is still fetched and put in force; only the
				// copy for the next start is lost, and that is said.
				m.log.Warn("blocking list copy cannot be saved in state_dir", zap.String("list", l.cfg.Name), zap.Error(terr))
			}
		}
		if err == nil {
			var copy io.Writer // a nil *os.File in it would not be nil
			if copyFile != nil {
				copy = copyFile
			}
			s, sum, err = parse(body, l.cfg.Kind == "allow", hint, maxBytes, copy, m.atPeak)
		}
		if copyFile != nil {
			if cerr := copyFile.Close(); err == nil && cerr != nil {
				err = fmt.Errorf("writing the copy in %s: %w", cfg.StateDir, cerr)
			}
		}
	}
	if body != nil {
		_ = body.Close()
	}
	if err == nil && s != nil && l.cfg.IsURL() && oldRules > 0 && s.rules < oldRules/2 {
		if !hasRefused || sum != refused {
			err = fmt.Errorf("%w: %d rules, fewer than half of the %d in force (the same body fetched again will be taken)", errTooFew, s.rules, oldRules)
		}
	}

	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	current := m.isCurrentLocked(l)
	if tempPath != "" && (err != nil || !current) {
		_ = os.Remove(tempPath)
	}
	if !current {
		return // replaced by a reload while fetching: its successor fetches for itself
	}
	l.checkedAt = now
	switch {
	case err != nil:
		if errors.Is(err, errTooFew) {
			l.refused, l.hasRefused = sum, true
		}
		l.lastError = err.Error()
		if l.set != nil {
			l.state = StateStale
		}
		l.m.failed.Add(1)
		l.failures++
		fields := []zap.Field{zap.String("list", l.cfg.Name), zap.String("source", redactSource(l.cfg.Source)), zap.Error(err)}
		if l.set != nil {
			fields = append(fields, zap.Duration("age", now.Sub(l.updatedAt).Round(time.Second)))
		}
		m.log.Warn("blocking list fetch failed; the copy in force stays", fields...)
	case notMod:
		l.state, l.lastError, l.updatedAt = StateOK, "", now
		l.m.unchanged.Add(1)
		l.failures = 0
		if cfg.StateDir != "" {
			meta = copyMeta{Source: l.cfg.Source, ETag: l.etag, LastModified: l.lastModified, UpdatedAt: now}
			m.writeMetaLocked(cfg.StateDir, l, meta)
		}
	default:
		l.set, l.state, l.lastError, l.updatedAt = s, StateOK, "", now
		l.hasRefused = false
		l.etag, l.lastModified = meta.ETag, meta.LastModified
		l.m.updated.Add(1)
		l.failures = 0
		m.publishLocked()
		if tempPath != "" {
			meta.Source, meta.UpdatedAt = l.cfg.Source, now
			if err := os.Rename(tempPath, copyPath(cfg.StateDir, l.cfg.Source)); err != nil {
				m.log.Warn("blocking list copy not saved", zap.String("list", l.cfg.Name), zap.Error(err))
			} else {
				m.writeMetaLocked(cfg.StateDir, l, meta)
			}
		}
	}
}

// isCurrentLocked reports whether l is still one of the configured lists.
func (m *Manager) isCurrentLocked(l *list) bool {
	for _, x := range m.lists {
		if x == l {
			return true
		}
	}
	return false
}

func (m *Manager) writeMetaLocked(dir string, l *list, meta copyMeta) {
	if err := writeMeta(dir, meta); err != nil {
		m.log.Warn("blocking list copy's metadata not saved", zap.String("list", l.cfg.Name), zap.Error(err))
	}
}

// get sends the conditional GET. notMod reports a 304.
func (m *Manager) get(ctx context.Context, url, etag, lastModified string) (body io.ReadCloser, meta copyMeta, notMod bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, meta, false, err
	}
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	if lastModified != "" {
		req.Header.Set("If-Modified-Since", lastModified)
	}
	req.Header.Set("User-Agent", "nxdnsd")
	resp, err := m.client.Do(req)
	if err != nil {
		return nil, meta, false, redactErr(err, url)
	}
	switch resp.StatusCode {
	case http.StatusOK:
		meta.ETag, meta.LastModified = resp.Header.Get("ETag"), resp.Header.Get("Last-Modified")
		return resp.Body, meta, false, nil
	case http.StatusNotModified:
		_ = resp.Body.Close()
		return nil, meta, true, nil
	}
	_ = resp.Body.Close()
	return nil, meta, false, fmt.Errorf("HTTP status %s", resp.Status)
}

// parse reads a list body into a new set, streaming: each line is parsed
// as it comes and dropped. It reads at most maxBytes (more is errTooLarge),
// copies what it reads to copy when non-nil, and returns the body's
// SHA-256. atPeak, when not nil, is called when the most memory is live
// (see Manager.atPeak).
func parse(body io.Reader, allowList bool, hint int, maxBytes int64, copy io.Writer, atPeak func()) (*set, [32]byte, error) {
	var sum [32]byte
	limited := &io.LimitedReader{R: body, N: maxBytes + 1}
	h := sha256.New()
	var r io.Reader = io.TeeReader(limited, h)
	if copy != nil {
		r = io.TeeReader(r, copy)
	}
	b := newBuilder(allowList, hint)
	b.atPeak = atPeak
	if err := readLines(r, b.line, func() { b.skipped++ }); err != nil {
		return nil, sum, err
	}
	if limited.N <= 0 {
		return nil, sum, fmt.Errorf("%w (%d MiB)", errTooLarge, maxBytes>>20)
	}
	finishSum(h, &sum)
	return b.finish(), sum, nil
}

func finishSum(h hash.Hash, sum *[32]byte) { h.Sum(sum[:0]) }

// readLines calls line for each line of r (without its line break), and
// tooLong for each line longer than the buffer, which is skipped.
func readLines(r io.Reader, line func([]byte), tooLong func()) error {
	br := bufio.NewReaderSize(r, 64<<10)
	skipping := false
	for {
		l, err := br.ReadSlice('\n')
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			if !skipping {
				tooLong()
			}
			skipping = true
			continue
		case skipping:
			skipping = false
		case len(l) > 0:
			line(trimEOL(l))
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the body: %w", err)
		}
	}
}

func trimEOL(l []byte) []byte {
	if n := len(l); n > 0 && l[n-1] == '\n' {
		l = l[:n-1]
	}
	if n := len(l); n > 0 && l[n-1] == '\r' {
		l = l[:n-1]
	}
	return l
}

// loadInitial puts l's last good copy in force: a URL list's from
// state_dir, a file list's from its file.
func (m *Manager) loadInitial(cfg config.Blocking, l *list) {
	if !l.cfg.IsURL() {
		m.fetch(context.Background(), l)
		return
	}
	if cfg.StateDir == "" {
		return
	}
	meta, err := readMeta(cfg.StateDir, l.cfg.Source)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			m.log.Warn("blocking list copy unreadable", zap.String("list", l.cfg.Name), zap.Error(err))
		}
		return
	}
	f, err := os.Open(copyPath(cfg.StateDir, l.cfg.Source))
	if err != nil {
		m.log.Warn("blocking list copy unreadable", zap.String("list", l.cfg.Name), zap.Error(err))
		return
	}
	defer f.Close()
	s, _, err := parse(f, l.cfg.Kind == "allow", 0, int64(cfg.MaxListMiB)<<20, nil, nil)
	if err != nil {
		m.log.Warn("blocking list copy unreadable", zap.String("list", l.cfg.Name), zap.Error(err))
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.isCurrentLocked(l) || l.set != nil {
		return
	}
	l.set, l.state, l.updatedAt = s, StateOK, meta.UpdatedAt
	l.etag, l.lastModified = meta.ETag, meta.LastModified
	m.publishLocked()
}
