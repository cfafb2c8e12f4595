package metrics

import (
	"io"
	"strconv"

	"github.com/nxdnsd/nxdnsd/internal/promtext"
)

// The query history's families (spec section 12, issue 28), read from the
// history at scrape time like the cache's, each written with a HELP text
// of its own. They exist from start-up, at zero while no history is
// attached (history off, or its database unavailable).

const (
	historyRowsFamily    = "nxdns_history_rows_total"
	historyRowsHelp      = "Query-history rows written to the database."
	historyDroppedFamily = "nxdns_history_dropped_total"
	historyDroppedHelp   = "Query-history rows dropped because the writer fell behind (its queue was full) or writing them failed; no query waits for the history."
	historyBytesFamily   = "nxdns_history_bytes"
	historyBytesHelp     = "Size of the query-history database in bytes (its write-ahead log included), against history.max_mib."
)

// HistoryStats is what the metrics read from the query history at scrape
// time; *history.History implements it.
type HistoryStats interface {
	Rows() uint64
	Dropped() uint64
	Bytes() int64
}

type historyRef struct{ HistoryStats }

// AttachHistory makes the scrape read the history's counters; nil
// detaches it (history turned off by a reload), and the series read zero.
func (m *Metrics) AttachHistory(h HistoryStats) {
	if h == nil {
		m.history.Store(nil)
		return
	}
	m.history.Store(&historyRef{h})
}

// writeHistory renders the history's families.
func (m *Metrics) writeHistory(w io.Writer) {
	var rows, dropped uint64
	var bytes int64
	if ref := m.history.Load(); ref != nil {
		rows, dropped, bytes = ref.Rows(), ref.Dropped(), ref.Bytes()
	}
	b := make([]byte, 0, 768)
	b = promtext.AppendHelp(b, historyRowsFamily, historyRowsHelp, "counter")
	b = append(b, historyRowsFamily+" "...)
	b = strconv.AppendUint(b, rows, 10)
	b = append(b, '\n')
	b = promtext.AppendHelp(b, historyDroppedFamily, historyDroppedHelp, "counter")
	b = append(b, historyDroppedFamily+" "...)
	b = strconv.AppendUint(b, dropped, 10)
	b = append(b, '\n')
	b = promtext.AppendHelp(b, historyBytesFamily, historyBytesHelp, "gauge")
	b = append(b, historyBytesFamily+" "...)
	b = strconv.AppendInt(b, bytes, 10)
	b = append(b, '\n')
	_, _ = w.Write(b)
}
