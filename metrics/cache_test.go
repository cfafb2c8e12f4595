package metrics

import "testing"

type fakeCache struct{}

func (fakeCache) Entries() int      { return 7 }
func (fakeCache) Bytes() int64      { return 4096 }
func (fakeCache) Evictions() uint64 { return 3 }

// The cache's series exist from start-up at zero, count what the query
// path reports, and read the cache's size at scrape time once attached.
func TestCacheSeries(t *testing.T) {
	t.Parallel()
	m := New(Config{Upstreams: []string{"a"}})
	fs := scrape(t, m)
	for _, r := range []string{"hit", "miss", "stale", "cached_failure"} {
		if v := value(t, fs, "nxdns_cache_lookups_total", "result", r); v != 0 {
			t.Errorf("lookups %s = %v at start, want 0", r, v)
		}
	}
	for _, name := range []string{"nxdns_cache_entries", "nxdns_cache_bytes", "nxdns_cache_evictions_total"} {
		if v := value(t, fs, name); v != 0 {
			t.Errorf("%s = %v before the cache is attached, want 0", name, v)
		}
	}
	m.CacheLookup(CacheHit)
	m.CacheLookup(CacheHit)
	m.CacheLookup(CacheStale)
	m.CacheLookup("bogus") // not a result: ignored
	m.Prefetch(true)
	m.Prefetch(false)
	m.Prefetch(false)
	m.AttachCache(fakeCache{})
	fs = scrape(t, m)
	for name, want := range map[[2]string]float64{
		{"nxdns_cache_lookups_total", "hit"}:        2,
		{"nxdns_cache_lookups_total", "stale"}:      1,
		{"nxdns_cache_lookups_total", "miss"}:       0,
		{"nxdns_cache_prefetches_total", "answer"}:  1,
		{"nxdns_cache_prefetches_total", "failure"}: 2,
	} {
		label := "result"
		if name[0] == "nxdns_cache_prefetches_total" {
			label = "outcome"
		}
		if v := value(t, fs, name[0], label, name[1]); v != want {
			t.Errorf("%s{%s=%q} = %v, want %v", name[0], label, name[1], v, want)
		}
	}
	for name, want := range map[string]float64{"nxdns_cache_entries": 7, "nxdns_cache_bytes": 4096, "nxdns_cache_evictions_total": 3} {
		if v := value(t, fs, name); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
	if f := fs["nxdns_cache_evictions_total"]; f == nil || f.Type != "counter" {
		t.Errorf("nxdns_cache_evictions_total is not rendered as a counter: %+v", f)
	}
}
