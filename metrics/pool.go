package metrics

import (
	"io"
	"strconv"

	vm "github.com/VictoriaMetrics/metrics"

	"github.com/nxdnsd/nxdnsd/actors"
)

// Pool is what the metrics read from the upstream pool at scrape time;
// *actors.Pool implements it.
type Pool interface {
	Sync()
	Status() []actors.Status
	BudgetExhaustedTotal() uint64
	ShareRefusedTotal() uint64
	QueuedTotal() uint64
	QueuedSeconds() float64
}

var (
	_ Pool            = (*actors.Pool)(nil)
	_ actors.Observer = (*Metrics)(nil)
)

// poolRef is the pool the scrape reads and the names of its upstreams, by
// index: swapped together, so one scrape never pairs a pool with another
// pool's names.
type poolRef struct {
	Pool
	ups *Upstreams // always non-nil
}

// writePool renders the families the pool counts itself. They are written
// here rather than as the set's callback gauges because the library
// renders a callback as a gauge: these are counters, and Prometheus must be
// told so (rate() and resets depend on it). One Status snapshot serves
// every family, so the families of one scrape agree with each other.
//
// Counter families end in _total and are written with the library's own
// metadata helper, so they look exactly like the set's counters.
func (m *Metrics) writePool(w io.Writer) {
	var (
		st    []actors.Status
		names = m.first.names
	)
	m.poolMu.Lock()
	ref, tot := m.pool.Load(), m.base
	if ref != nil {
		tot = tot.plus(totalsOf(ref.Pool))
	}
	m.poolMu.Unlock()
	exhausted, refused, queued, queuedSeconds := tot.exhausted, tot.refused, tot.queued, tot.queuedSeconds
	if ref != nil {
		names = ref.ups.names
		// After Sync, every outcome of every query answered before this
		// scrape began is in the counts.
		ref.Sync()
		st = ref.Status()
	}
	status := func(i int) actors.Status {
		if i < len(st) {
			return st[i]
		}
		return actors.Status{}
	}

	b := make([]byte, 0, 256+len(names)*5*64)
	perUpstream := func(family, kind string, value func(actors.Status) uint64) {
		b = appendMetadata(b, family, kind)
		for i, name := range names {
			b = append(b, family...)
			b = append(b, `{upstream="`...)
			b = append(b, escape(name)...)
			b = append(b, `"} `...)
			b = strconv.AppendUint(b, value(status(i)), 10)
			b = append(b, '\n')
		}
	}
	perUpstream("nxdns_upstream_success_total", "counter", func(s actors.Status) uint64 { return s.Successes })
	perUpstream("nxdns_upstream_failure_total", "counter", func(s actors.Status) uint64 { return s.Failures })
	perUpstream("nxdns_upstream_in_flight", "gauge", func(s actors.Status) uint64 { return uint64(s.InFlight) })
	perUpstream("nxdns_upstream_slots", "gauge", func(s actors.Status) uint64 { return uint64(s.Slots) })
	perUpstream("nxdns_upstream_backoff", "gauge", func(s actors.Status) uint64 {
		if s.InBackoff {
			return 1
		}
		return 0
	})

	b = appendUint(b, "nxdns_upstream_queued_total", "counter", queued)
	b = strconv.AppendFloat(appendSeries(b, "nxdns_upstream_queued_seconds_total", "counter"), queuedSeconds, 'g', -1, 64)
	b = append(b, '\n')
	b = appendUint(b, "nxdns_upstream_budget_exhausted_total", "counter", exhausted)
	b = appendUint(b, "nxdns_upstream_share_refused_total", "counter", refused)
	b = appendProbes(b, names, status)
	_, _ = w.Write(b) // a failed write is the scraper's problem; it sees a short body
}

// metadataBuffer captures the library's metadata lines (written only when
// metrics.ExposeMetadata is on) into a byte slice.
type metadataBuffer struct{ b []byte }

func (mb *metadataBuffer) Write(p []byte) (int, error) {
	mb.b = append(mb.b, p...)
	return len(p), nil
}

// appendUint appends family, a family of one series without labels, of
// the kind given ("counter", "gauge"), with its metadata and the value v.
func appendUint(b []byte, family, kind string, v uint64) []byte {
	return append(strconv.AppendUint(appendSeries(b, family, kind), v, 10), '\n')
}

// appendSeries appends family's metadata and the start of its one series
// without labels, up to its value.
func appendSeries(b []byte, family, kind string) []byte {
	b = appendMetadata(b, family, kind)
	b = append(b, family...)
	return append(b, ' ')
}

// appendMetadata appends the HELP and TYPE lines of family, exactly as the
// library writes them for its own metrics.
func appendMetadata(b []byte, family, kind string) []byte {
	mb := metadataBuffer{b}
	vm.WriteMetadataIfNeeded(&mb, family, kind)
	return mb.b
}
