package daemon

import (
	"errors"
	"net/http"
	"reflect"
	"slices"
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
// page first (seconds on a big file) and DNS is served meanwhile. The rows
// of the queries answered while it opens wait for it (maxPending of them
// at most, the rest dropped and counted), and go to it first once it is
// open.
//
// It is also the metrics' HistoryStats: the counters of the histories a
// reload closed are kept, so that nxdns_history_rows_total and
// nxdns_history_dropped_total never go back.
type historian struct {
	log *zap.Logger

	cur     atomic.Pointer[historyState] // or nil: history off, unavailable, or still opening
	opening atomic.Bool                  // an apply is closing the old and opening the new: the rows meanwhile wait in pending
	early   atomic.Uint64                // rows dropped while opening: pending was full, or the open failed

	openHistory func(config.History, *zap.Logger) (*history.History, error) // history.Open; tests slow it

	pmu     sync.Mutex    // guards pending, and the change from opening to open
	pending []history.Row // the rows of the queries answered while opening

	// off serves the API while no history is open: 503. Register puts
	// the patterns on the admin mux once; each request goes to the open
	// history's mux (historyState) or to this one.
	off *http.ServeMux

	mu      sync.Mutex // guards following
	cfg     config.History
	gen     uint64             // bumped by every apply and close: an Open of an older one closes what it opened
	closing []*history.History // taken off the query path, still writing what was queued
	base    [2]uint64          // rows written, dropped by the histories closed
	ready   chan struct{}      // closed when the latest apply's close and open have ended; the next waits on it
	wg      sync.WaitGroup     // applies in flight
}

// historyState is one open history and the mux serving its API.
type historyState struct {
	h   *history.History
	mux *http.ServeMux
}

func newHistorian(log *zap.Logger) *historian {
	hs := &historian{log: log, off: http.NewServeMux(), ready: make(chan struct{}), openHistory: history.Open}
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
// allocation; while a history opens, a lock and an append (hold).
func (hs *historian) record(e *query.Entry) {
	if hs == nil {
		return
	}
	st := hs.cur.Load()
	if st == nil {
		if hs.opening.Load() {
			hs.hold(e)
		}
		return
	}
	st.h.Record(rowOf(e))
}

// maxPending bounds the rows that wait while a history opens: as many as
// its queue holds.
const maxPending = history.QueueSize

// hold keeps the row of e for the history being opened, or hands it to
// the one opened meanwhile. It runs only while a history opens.
func (hs *historian) hold(e *query.Entry) {
	hs.pmu.Lock()
	defer hs.pmu.Unlock()
	if st := hs.cur.Load(); st != nil {
		st.h.Record(rowOf(e))
		return
	}
	if !hs.opening.Load() {
		return // no history: no row
	}
	if len(hs.pending) >= maxPending {
		hs.early.Add(1)
		return
	}
	hs.pending = append(hs.pending, rowOf(e))
}

// publish puts st on the query path, after the rows that waited for it.
func (hs *historian) publish(st *historyState) {
	hs.pmu.Lock()
	defer hs.pmu.Unlock()
	for _, r := range hs.pending {
		st.h.Record(r) // a full queue drops and counts, as for any row
	}
	hs.pending = nil
	hs.cur.Store(st)
	hs.opening.Store(false)
}

// dropPending ends an opening that will not give a history (it failed,
// or the history is turned off): the rows that waited are counted as
// dropped.
func (hs *historian) dropPending() {
	hs.pmu.Lock()
	defer hs.pmu.Unlock()
	hs.opening.Store(false)
	hs.early.Add(uint64(len(hs.pending)))
	hs.pending = nil
}

// rowOf is the history's row of e.
func rowOf(e *query.Entry) history.Row {
	return history.Row{
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
	}
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
// and a history open (or opening), nothing happens; otherwise the open
// one (if any) is taken off the query path at once, then closed, and,
// when cfg.Enabled, a new one opened, both on a goroutine of their own.
// An unchanged [history] whose file could not be opened is tried again.
//
// The closes and opens run one after the other, each after those of the
// apply before it: a reload that changes retention_days reopens the same
// file, which the history closed must have let go of first.
func (hs *historian) apply(cfg config.History) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if reflect.DeepEqual(cfg, hs.cfg) && (hs.cur.Load() != nil || hs.opening.Load()) {
		return
	}
	hs.cfg = cfg
	hs.gen++
	// Opening before the old one goes: a row in between goes to one or
	// the other.
	hs.opening.Store(cfg.Enabled)
	old := hs.detachLocked()
	if !cfg.Enabled {
		hs.dropPending()
	}
	gen, prev, ready := hs.gen, hs.ready, make(chan struct{})
	hs.ready = ready
	hs.wg.Go(func() {
		defer close(ready)
		<-prev
		if old != nil {
			hs.finishClose(old)
		}
		if !cfg.Enabled || hs.stale(gen) {
			return // a later apply decides
		}
		h, err := hs.openHistory(cfg, hs.log)
		hs.mu.Lock()
		if gen != hs.gen {
			// A reload or Shutdown came while it opened.
			if h != nil {
				hs.closing = append(hs.closing, h)
			}
			hs.mu.Unlock()
			if h != nil {
				hs.finishClose(h)
			}
			return
		}
		defer hs.mu.Unlock()
		if err != nil {
			hs.dropPending()
			// ErrUnavailable: the file was left as it is (a damaged one
			// was renamed aside inside Open, and logged there).
			hs.log.Error("the query history is off until the next reload; DNS is served",
				historyWhere(cfg), zap.Bool("file_left_alone", errors.Is(err, history.ErrUnavailable)), zap.Error(err))
			return
		}
		mux := http.NewServeMux()
		h.Register(mux)
		hs.publish(&historyState{h: h, mux: mux})
		hs.log.Info("query history open", historyWhere(cfg))
	})
}

// stale reports whether an apply or close came after the one of gen.
func (hs *historian) stale(gen uint64) bool {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return gen != hs.gen
}

// historyWhere is the log field naming the history's database: its
// PostgreSQL connection string, password redacted, or its file.
func historyWhere(cfg config.History) zap.Field {
	if cfg.Postgres != "" {
		return zap.String("postgres", config.RedactPostgres(cfg.Postgres))
	}
	return zap.String("path", historyPath(cfg.Path))
}

func historyPath(p string) string {
	if p == "" {
		return "(in memory)"
	}
	return p
}

// detachLocked takes the open history, if any, off the query path and
// returns it, counted among those closing until finishClose.
func (hs *historian) detachLocked() *history.History {
	st := hs.cur.Swap(nil)
	if st == nil {
		return nil
	}
	hs.closing = append(hs.closing, st.h)
	return st.h
}

// finishClose closes h, which writes what it had queued, and folds its
// counters into base.
func (hs *historian) finishClose(h *history.History) {
	if err := h.Close(); err != nil {
		hs.log.Error("closing the query history", zap.Error(err))
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if i := slices.Index(hs.closing, h); i >= 0 {
		hs.closing = slices.Delete(hs.closing, i, i+1)
	}
	hs.base[0] += h.Rows()
	hs.base[1] += h.Dropped()
}

// opened returns a channel closed when the latest open attempt (and the
// closes before it) has ended; at once when none is running. For tests.
func (hs *historian) opened() <-chan struct{} {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.ready
}

// close closes the history, waiting for the opens and closes in flight
// and for every history to write what was queued. Shutdown calls it once
// no query runs.
func (hs *historian) close() {
	hs.mu.Lock()
	hs.gen++
	hs.cfg = config.History{}
	hs.dropPending()
	old := hs.detachLocked()
	prev := hs.ready
	hs.mu.Unlock()
	<-prev
	if old != nil {
		hs.finishClose(old)
	}
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
