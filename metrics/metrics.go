// Package metrics is nxdnsd's metric set: every name of spec section 7,
// rendered in the Prometheus text format by VictoriaMetrics/metrics.
//
// Each Metrics owns its own metrics.Set, never the library's global one, so
// two daemons (or two tests) in one process count separately. Counters the
// query path moves itself live in the set; what the pool already counts
// (successes, failures, slots, backoff, queued waits, exhausted budgets) is
// read from the pool at scrape time, so the metrics, /api/health and the
// pool can never disagree.
package metrics

import (
	"bytes"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	vm "github.com/VictoriaMetrics/metrics"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/internal/dnstext"
	"github.com/nxdnsd/nxdnsd/internal/promtext"
)

// Protocols and rcodes whose nxdns_queries_total series exist from start:
// the rcodes nxdnsd itself answers with, and the common ones upstreams
// send. Any other rcode gets its series when it is first seen.
var (
	protos     = [...]string{"udp", "tcp", "tls", "https"}
	initRcodes = [...]int{0, 1, 2, 3, 4, 5, 16} // NOERROR FORMERR SERVFAIL NXDOMAIN NOTIMP REFUSED BADVERS
)

// rcodeCache is how many rcodes have a cached counter per protocol; the
// header's 4-bit rcode plus the extended ones up to BADCOOKIE (23) fit.
const rcodeCache = 24

// zoneOutcomes are the outcome label values of
// nxdns_forward_zone_queries_total; query.ZoneAnswer and friends.
var zoneOutcomes = [...]string{"answer", "timeout", "error"}

// durationBuckets are the upper bounds, in seconds, of both latency
// histograms: from a local answer (well under a millisecond) to the
// longest budget an operator is likely to configure.
var durationBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Config names the series that exist from start-up.
type Config struct {
	// Upstreams are the pool's upstream names, by pool index.
	Upstreams []string

	// Zones are the forward zones' names, as query.Entry.Zone spells them.
	Zones []string

	// Version is nxdnsd's version, the version label of nxdns_build_info;
	// "" reads "unknown".
	Version string
}

// Metrics is one daemon's metric set. It implements actors.Observer. All
// methods are safe for concurrent use. The ones on the query path
// (ObserveAttempt, Query, ForwardZone and the event counters) allocate
// nothing for the series New created; they take no lock but the library's
// brief one per histogram update.
type Metrics struct {
	set *vm.Set

	queries       [len(protos)][rcodeCache]atomic.Pointer[vm.Counter] // by proto index, rcode; filled lazily past initRcodes
	queryDuration *vm.PrometheusHistogram

	first *Upstreams // the series of cfg.Upstreams: the observer of the pool built at start

	zones atomic.Pointer[zoneSet] // never nil; replaced whole by UseZones

	overloadRefused *vm.Counter
	aclRefused      *vm.Counter
	panics          *vm.Counter
	queryLogDropped *vm.Counter
	rebindStripped  *vm.Counter
	reloads         [len(reloadResults)]*vm.Counter

	cache cacheCounters
	pool  atomic.Pointer[poolRef] // nil until UsePool

	poolMu     sync.Mutex               // guards following, and the swaps of pool
	base       poolTotals               // what the pools replaced by UsePool counted
	retiring   map[Pool]poolTotals      // a replaced pool's counts when it was replaced, until RetirePool
	cacheStats atomic.Pointer[cacheRef] // nil until AttachCache

	history atomic.Pointer[historyRef] // nil until AttachHistory
}

// New creates the metric set with every series of spec section 7 at zero:
// per-upstream series for every name in cfg.Upstreams, per-zone series for
// every zone.
//
// New turns on the library's process-wide metadata switch
// (metrics.ExposeMetadata), so that every family is rendered with its
// # TYPE line: Prometheus then knows the counters from the gauges, the
// histograms' buckets from plain series. It is only ever switched on.
func New(cfg Config) *Metrics {
	vm.ExposeMetadata(true)
	s := vm.NewSet()
	m := &Metrics{
		set:             s,
		queryDuration:   s.NewPrometheusHistogramExt("nxdns_query_duration_seconds", durationBuckets),
		overloadRefused: s.NewCounter("nxdns_overload_refused_total"),
		aclRefused:      s.NewCounter("nxdns_acl_refused_total"),
		panics:          s.NewCounter("nxdns_panics_total"),
		queryLogDropped: s.NewCounter("nxdns_query_log_dropped_total"),
		rebindStripped:  s.NewCounter("nxdns_rebind_stripped_total"),
		cache:           newCacheCounters(s),
	}
	for p := range protos {
		for _, rc := range initRcodes {
			m.queryCounter(p, rc)
		}
	}
	for i, r := range reloadResults {
		m.reloads[i] = s.NewCounter(`nxdns_config_reloads_total{result="` + r + `"}`)
	}
	version := cfg.Version
	if version == "" {
		version = "unknown"
	}
	s.NewGauge(`nxdns_build_info{version="`+escape(version)+`",goversion="`+escape(runtime.Version())+`"}`, func() float64 { return 1 })
	m.first = m.Upstreams(cfg.Upstreams)
	m.UseZones(cfg.Zones)
	s.RegisterMetricsWriter(m.writePool)
	s.RegisterMetricsWriter(m.writeCache)
	s.RegisterMetricsWriter(m.writeHistory)
	return m
}

// RegisterWriter adds families that w writes, HELP and TYPE lines
// included, to every scrape, after nxdnsd's own: what a package counts
// itself (blocking's four families, spec section 11), so that it exists
// from start-up like the rest.
func (m *Metrics) RegisterWriter(w func(io.Writer)) { m.set.RegisterMetricsWriter(w) }

// ObserveAttempt counts one pool attempt by how it ended and records its
// duration (actors.Observer).
// The upstream is an index of cfg.Upstreams: a pool built later, on a
// reload, observes through its own Upstreams.
func (m *Metrics) ObserveAttempt(upstream int, o actors.Outcome, d time.Duration) {
	m.first.ObserveAttempt(upstream, o, d)
}

// Query counts one answered client query by protocol ("udp", "tcp", "tls",
// "https") and
// the rcode sent, and records how long it took.
func (m *Metrics) Query(proto string, rcode int, d time.Duration) {
	p := protoIndex(proto)
	if p < 0 || rcode < 0 || rcode >= rcodeCache {
		m.set.GetOrCreateCounter(querySeries(proto, rcode)).Inc() // rare: allocates the name
	} else {
		m.queryCounter(p, rcode).Inc()
	}
	m.queryDuration.Update(d.Seconds())
}

// queryCounter returns the cached counter of protos[p] and rcode, creating
// it on first use.
func (m *Metrics) queryCounter(p, rcode int) *vm.Counter {
	slot := &m.queries[p][rcode]
	if c := slot.Load(); c != nil {
		return c
	}
	// GetOrCreateCounter returns the one counter of a name however many
	// goroutines race here, so storing any of them is right.
	c := m.set.GetOrCreateCounter(querySeries(protos[p], rcode))
	slot.Store(c)
	return c
}

// ForwardZone counts one forward-zone exchange of zone by its outcome
// (query.ZoneAnswer, ZoneTimeout or ZoneError).
func (m *Metrics) ForwardZone(zone, outcome string) {
	if cs, ok := m.zones.Load().counters[zone]; ok {
		for i, o := range zoneOutcomes {
			if o == outcome {
				cs[i].Inc()
				return
			}
		}
	}
	m.set.GetOrCreateCounter(zoneSeries(zone, outcome)).Inc() // not configured: allocates the name
}

// ACLRefused counts one query answered REFUSED because its client is
// outside server.allow.
func (m *Metrics) ACLRefused() { m.aclRefused.Inc() }

// RebindStripped counts one answer from which rebinding protection
// removed private addresses (spec section 15).
func (m *Metrics) RebindStripped() { m.rebindStripped.Inc() }

// OverloadRefused counts one query answered REFUSED because
// server.max_concurrent_queries were being served (server.Server.OnOverload).
func (m *Metrics) OverloadRefused() { m.overloadRefused.Inc() }

// Panic counts one panic recovered while serving a query
// (server.Server.OnPanic).
func (m *Metrics) Panic() { m.panics.Inc() }

// QueryLogDropped counts one query-log line dropped because the writer
// fell behind.
func (m *Metrics) QueryLogDropped() { m.queryLogDropped.Inc() }

// QueryLogLost counts query-log lines accepted and then lost because a
// write failed (querylog.Options.Dropped), in the same series as
// QueryLogDropped: a line the log does not hold is counted once, whatever
// lost it.
func (m *Metrics) QueryLogLost(lines int) { m.queryLogDropped.Add(lines) }

// WritePrometheus writes every nxdnsd series, then the Go runtime and
// process metrics of the library, in the Prometheus text format (version
// 0.0.4), every family with its HELP text and TYPE. It first waits for
// the pool's actors to apply every outcome sent so far (see
// actors.Pool.Sync).
func (m *Metrics) WritePrometheus(w io.Writer) {
	var exp bytes.Buffer
	m.set.WritePrometheus(&exp)
	vm.WriteProcessMetrics(&exp)
	_, _ = w.Write(withHelp(make([]byte, 0, exp.Len()+8<<10), exp.Bytes())) // a failed write is the scraper's problem
}

func protoIndex(proto string) int {
	for i, p := range protos {
		if p == proto {
			return i
		}
	}
	return -1
}

func querySeries(proto string, rcode int) string {
	return `nxdns_queries_total{proto="` + escape(proto) + `",rcode="` + dnstext.Rcode(rcode) + `"}`
}

func zoneSeries(zone, outcome string) string {
	return `nxdns_forward_zone_queries_total{zone="` + escape(zone) + `",outcome="` + escape(outcome) + `"}`
}

// escape is a label value escaped (promtext.Escape).
func escape(v string) string { return promtext.Escape(v) }
