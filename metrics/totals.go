package metrics

import "github.com/miekg/dns"

// Totals are the counters the status page sums up (GET /api/stats), read
// from the same counters the exposition renders.
type Totals struct {
	// Queries are the answered client queries by the rcode sent, both
	// transports together; Rcodes beyond the header's extended range (past
	// 23) are counted in nxdns_queries_total only.
	Queries, NoError, NXDomain, ServFail, Refused uint64

	// Cache lookups by result (nxdns_cache_lookups_total); CacheOn is
	// false while no cache is attached (cache.enabled = false).
	CacheOn                                             bool
	CacheHit, CacheMiss, CacheStale, CacheCachedFailure uint64
	CacheEntries                                        int
	CacheBytes                                          int64

	BudgetExhausted uint64 // nxdns_upstream_budget_exhausted_total, every pool's
	OverloadRefused uint64
	QueryLogDropped uint64
}

// Totals reads the counters the status page shows. Reading them never
// touches the query path's counters but to load them.
func (m *Metrics) Totals() Totals {
	var t Totals
	for p := range m.queries {
		for rc := range m.queries[p] {
			c := m.queries[p][rc].Load()
			if c == nil {
				continue
			}
			n := c.Get()
			t.Queries += n
			switch rc {
			case dns.RcodeSuccess:
				t.NoError += n
			case dns.RcodeNameError:
				t.NXDomain += n
			case dns.RcodeServerFailure:
				t.ServFail += n
			case dns.RcodeRefused:
				t.Refused += n
			}
		}
	}
	l := &m.cache.lookups
	t.CacheHit, t.CacheMiss, t.CacheStale, t.CacheCachedFailure = l[0].Get(), l[1].Get(), l[2].Get(), l[3].Get()
	if ref := m.cacheStats.Load(); ref != nil {
		t.CacheOn = true
		t.CacheEntries, t.CacheBytes = ref.Entries(), ref.Bytes()
	}
	m.poolMu.Lock()
	ref, tot := m.pool.Load(), m.base
	if ref != nil {
		tot = tot.plus(totalsOf(ref.Pool))
	}
	m.poolMu.Unlock()
	t.BudgetExhausted = tot.exhausted
	t.OverloadRefused = m.overloadRefused.Get()
	t.QueryLogDropped = m.queryLogDropped.Get()
	return t
}
