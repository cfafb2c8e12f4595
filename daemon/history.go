package daemon

import (
	"errors"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/nxdnsd/nxdnsd/config"
	"github.com/nxdnsd/nxdnsd/history"
	"github.com/nxdnsd/nxdnsd/query"
)

// historian holds the daemon's query history (spec section 12) across
// its opens and reloads. The query path reads the current history with
// one atomic load and hands it a row; the database is opened on a
// goroutine of its own, since a file closed uncleanly is checked page by
// page first (seconds on a big file) and DNS is served meanwhile. Rows of
// the queries answered while it opens are dropped and counted.
//
// It is also the metrics' HistoryStats: the counters of the histories a
// reload closed are kept, so that nxdns_history_rows_total and
// nxdns_history_dropped_total never go back.
type historian struct {
	log *zap.Logger

	cur     atomic.Pointer[historyState] // or nil: history off, unavailable, or still opening
	opening atomic.Bool                  // an Open is running: the rows meanwhile are dropped and counted
	early   atomic.Uint64                // rows dropped while opening

	// routes serves the API of the current history; its patterns are
	// registered once on the admin mux.
	off *http.ServeMux // the API of no history: 503

	mu      sync.Mutex // guards following
	cfg     config.History
	gen     uint64             // bumped by every open and close: a late Open of an older one closes what it opened
	closing []*history.History // closed by a reload, still writing what was queued
	base    [2]uint64          // rows written, dropped by the histories closed
	ready   chan struct{}      // closed when the latest open attempt has ended; tests wait on it
	wg      sync.WaitGroup     // opens and closes in flight
}

// historyState is one open history and the mux serving its API.
type historyState struct {
	h   *history.History
	mux *http.ServeMux
}

func newHistorian(log *zap.Logger) *historian {
	hs := &historian{log: log, off: http.NewServeMux(), ready: make(chan struct{})}
	(*history.History)(nil).Register(hs.off)
	close(hs.ready)
	return hs
}

// active reports whether record would do anything: a history is open or
// opening. A nil historian (an observer of a benchmark) has none.
func (hs *historian) active() bool {
	return hs != nil && (hs.cur.Load() != nil || hs.opening.Load())
}

// record hands the row of e to the current history. It runs on the
// query's goroutine: an atomic load and a send that never waits, no
// allocation.
func (hs *historian) record(e *query.Entry) {
	if hs == nil {
		return
	}
	st := hs.cur.Load()
	if st == nil {
		if hs.opening.Load() {
			hs.early.Add(1)
		}
		return
	}
	st.h.Record(history.Row{
		Time:       e.Time,
		Client:     e.Client.Addr(),
		ClientName: e.ClientName,
		Proto:      e.Proto,
		QName:      e.QName,
		QType:      e.QType,
		Rcode:      e.Rcode,
		Source:     e.Source,
		Upstream:   e.Upstream,
		Duration:   e.Duration,
		List:       e.List,
	})
}

// current returns the open history, or nil.
func (hs *historian) current() *history.History {
	if st := hs.cur.Load(); st != nil {
		return st.h
	}
	return nil
}

// Register adds the history's API to the admin mux: GET /api/history,
// /api/stats/top and /api/stats/timeline, answered by whichever history
// is open when the request comes, 503 while none is.
func (hs *historian) Register(mux *http.ServeMux) {
	serve := func(w http.ResponseWriter, r *http.Request) {
		if st := hs.cur.Load(); st != nil {
			st.mux.ServeHTTP(w, r)
			return
		}
		hs.off.ServeHTTP(w, r)
	}
	for _, p := range []string{"GET /api/history", "GET /api/stats/top", "GET /api/stats/timeline"} {
		mux.HandleFunc(p, serve)
	}
}

// apply makes cfg the history's configuration: with [history] unchanged
// and a history open, nothing happens; otherwise the open one (if any) is
// closed in the background and, when cfg.Enabled, a new one opened in the
// background. An unchanged [history] whose file could not be opened is
// tried again.
func (hs *historian) apply(cfg config.History) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if reflect.DeepEqual(cfg, hs.cfg) && (hs.cur.Load() != nil || hs.opening.Load()) {
		return
	}
	hs.cfg = cfg
	hs.gen++
	hs.detachLocked()
	if !cfg.Enabled {
		return
	}
	gen, ready := hs.gen, make(chan struct{})
	hs.ready = ready
	hs.opening.Store(true)
	hs.wg.Go(func() {
		defer close(ready)
		h, err := history.Open(cfg, hs.log)
		hs.mu.Lock()
		defer hs.mu.Unlock()
		if gen != hs.gen {
			// A reload or Shutdown came while it opened.
			if h != nil {
				hs.closeLocked(h)
			}
			return
		}
		hs.opening.Store(false)
		if err != nil {
			// ErrUnavailable: the file was left as it is (a damaged one
			// was renamed aside inside Open, and logged there).
			hs.log.Error("the query history is off until the next reload; DNS is served",
				zap.String("path", cfg.Path), zap.Bool("file_left_alone", errors.Is(err, history.ErrUnavailable)), zap.Error(err))
			return
		}
		mux := http.NewServeMux()
		h.Register(mux)
		hs.cur.Store(&historyState{h: h, mux: mux})
		hs.log.Info("query history open", zap.String("path", historyPath(cfg.Path)))
	})
}

func historyPath(p string) string {
	if p == "" {
		return "(in memory)"
	}
	return p
}

// detachLocked takes the open history off the query path and closes it
// in the background: it writes what was queued first.
func (hs *historian) detachLocked() {
	hs.opening.Store(false)
	st := hs.cur.Swap(nil)
	if st == nil {
		return
	}
	hs.closeLocked(st.h)
}

// closeLocked closes h in the background; its counters stay in the
// metrics' sums until they are folded into base.
func (hs *historian) closeLocked(h *history.History) {
	hs.closing = append(hs.closing, h)
	hs.wg.Go(func() {
		if err := h.Close(); err != nil {
			hs.log.Error("closing the query history", zap.Error(err))
		}
		hs.mu.Lock()
		defer hs.mu.Unlock()
		for i, c := range hs.closing {
			if c == h {
				hs.closing = append(hs.closing[:i], hs.closing[i+1:]...)
				break
			}
		}
		hs.base[0] += h.Rows()
		hs.base[1] += h.Dropped()
	})
}

// opened returns a channel closed when the latest open attempt has ended
// (at once when none is running). For tests.
func (hs *historian) opened() <-chan struct{} {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.ready
}

// close closes the history, waiting for an open in flight to end and for
// every history to write what was queued. Shutdown calls it once no
// query runs.
func (hs *historian) close() {
	hs.mu.Lock()
	hs.gen++
	hs.cfg = config.History{}
	hs.detachLocked()
	hs.mu.Unlock()
	hs.wg.Wait()
}

// Rows implements metrics.HistoryStats: rows written, by every history
// this daemon opened.
func (hs *historian) Rows() uint64 {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	n := hs.base[0]
	for _, h := range hs.liveLocked() {
		n += h.Rows()
	}
	return n
}

// Dropped implements metrics.HistoryStats: rows dropped by every history,
// and those of the queries answered while one opened.
func (hs *historian) Dropped() uint64 {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	n := hs.base[1] + hs.early.Load()
	for _, h := range hs.liveLocked() {
		n += h.Dropped()
	}
	return n
}

// Bytes implements metrics.HistoryStats: the open database's size, 0
// when none is open.
func (hs *historian) Bytes() int64 {
	if h := hs.current(); h != nil {
		return h.Bytes()
	}
	return 0
}

func (hs *historian) liveLocked() []*history.History {
	out := hs.closing
	if h := hs.current(); h != nil {
		out = append(out[:len(out):len(out)], h)
	}
	return out
}
