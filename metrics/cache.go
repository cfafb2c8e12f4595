package metrics

import (
	"io"
	"strconv"

	vm "github.com/VictoriaMetrics/metrics"
)

// Cache lookup results, the result label of nxdns_cache_lookups_total.
const (
	CacheHit           = "hit"            // a fresh answer
	CacheMiss          = "miss"           // nothing usable: resolved
	CacheStale         = "stale"          // an expired answer within its stale window
	CacheCachedFailure = "cached_failure" // a remembered failure (RFC 9520)
)

var cacheResults = [...]string{CacheHit, CacheMiss, CacheStale, CacheCachedFailure}

// prefetchOutcomes are the outcome label values of
// nxdns_cache_prefetches_total.
var prefetchOutcomes = [...]string{"answer", "failure"}

// CacheStats is what the metrics read from the answer cache at scrape
// time; *cache.Cache implements it.
type CacheStats interface {
	Entries() int
	Bytes() int64
	Evictions() uint64
}

type cacheRef struct{ CacheStats }

// cacheCounters are the cache's counters the query path moves.
type cacheCounters struct {
	lookups    [len(cacheResults)]*vm.Counter
	prefetches [len(prefetchOutcomes)]*vm.Counter
}

func newCacheCounters(s *vm.Set) cacheCounters {
	var c cacheCounters
	for i, r := range cacheResults {
		c.lookups[i] = s.NewCounter(`nxdns_cache_lookups_total{result="` + r + `"}`)
	}
	for i, o := range prefetchOutcomes {
		c.prefetches[i] = s.NewCounter(`nxdns_cache_prefetches_total{outcome="` + o + `"}`)
	}
	return c
}

// AttachCache makes the scrape read the cache's size and evictions. Until
// then (or with the cache off) they read zero.
func (m *Metrics) AttachCache(c CacheStats) { m.cacheStats.Store(&cacheRef{c}) }

// CacheLookup counts one cache lookup by its result (CacheHit, CacheMiss,
// CacheStale or CacheCachedFailure).
func (m *Metrics) CacheLookup(result string) {
	for i, r := range cacheResults {
		if r == result {
			m.cache.lookups[i].Inc()
			return
		}
	}
}

// Prefetch counts one background refresh of a cached answer by whether it
// brought an answer.
func (m *Metrics) Prefetch(answered bool) {
	if answered {
		m.cache.prefetches[0].Inc()
	} else {
		m.cache.prefetches[1].Inc()
	}
}

// writeCache renders the families read from the cache at scrape time.
func (m *Metrics) writeCache(w io.Writer) {
	var entries int
	var bytes int64
	var evictions uint64
	if ref := m.cacheStats.Load(); ref != nil {
		entries, bytes, evictions = ref.Entries(), ref.Bytes(), ref.Evictions()
	}
	b := make([]byte, 0, 512)
	b = append(strconv.AppendInt(appendSeries(b, "nxdns_cache_entries", "gauge"), int64(entries), 10), '\n')
	b = append(strconv.AppendInt(appendSeries(b, "nxdns_cache_bytes", "gauge"), bytes, 10), '\n')
	b = appendUint(b, "nxdns_cache_evictions_total", "counter", evictions)
	_, _ = w.Write(b)
}
