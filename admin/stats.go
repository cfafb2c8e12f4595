package admin

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/nxdnsd/nxdnsd/metrics"
)

// Counters is what GET /api/stats sums up; *metrics.Metrics implements
// it.
type Counters interface {
	Totals() metrics.Totals
}

var _ Counters = (*metrics.Metrics)(nil)

// The query rate the status page shows is averaged over rateWindow, from
// samples of the query counter taken every rateEvery: a minute smooths
// the bursts of a household's browsing, and a sample every 5 s wakes the
// process twelve times a minute for it.
const (
	rateWindow = time.Minute
	rateEvery  = 5 * time.Second
)

// Stats is the body of GET /api/stats, described by openapi.yaml: the
// counters of the status page, summed from the metrics so that the page
// never parses the Prometheus text.
type Stats struct {
	Version   string    `json:"version"`
	Now       time.Time `json:"now"`        // the server's clock: "how long ago" is reckoned from it, not the browser's
	StartedAt time.Time `json:"started_at"` // when the admin server started, with nxdnsd

	QPS         float64 `json:"qps"`           // answered queries per second over the last rate_window_s
	RateWindowS float64 `json:"rate_window_s"` // a minute, or less while nxdnsd is younger

	Queries         QueryCounts `json:"queries"`
	Cache           CacheCounts `json:"cache"`
	BudgetExhausted uint64      `json:"budget_exhausted"`
	OverloadRefused uint64      `json:"overload_refused"`
	QueryLogDropped uint64      `json:"query_log_dropped"`
}

// QueryCounts are the answered client queries since start, by rcode.
type QueryCounts struct {
	Total    uint64 `json:"total"`
	NoError  uint64 `json:"noerror"`
	NXDomain uint64 `json:"nxdomain"`
	ServFail uint64 `json:"servfail"`
	Refused  uint64 `json:"refused"`
	Other    uint64 `json:"other"`
}

// CacheCounts are the answer cache's lookups since start, by result.
type CacheCounts struct {
	Enabled       bool     `json:"enabled"`
	Hit           uint64   `json:"hit"`
	Miss          uint64   `json:"miss"`
	Stale         uint64   `json:"stale"`
	CachedFailure uint64   `json:"cached_failure"`
	HitRatio      *float64 `json:"hit_ratio"` // (hit + cached_failure) / lookups; null before any lookup
	Entries       int      `json:"entries"`
	Bytes         int64    `json:"bytes"`
}

// StatsOf builds the body of GET /api/stats from t, at now, with qps over
// window.
func StatsOf(t metrics.Totals, version string, started, now time.Time, qps float64, window time.Duration) Stats {
	st := Stats{
		Version:     version,
		Now:         now.UTC().Round(0),
		StartedAt:   started.UTC().Round(0),
		QPS:         qps,
		RateWindowS: window.Seconds(),
		Queries: QueryCounts{
			Total: t.Queries, NoError: t.NoError, NXDomain: t.NXDomain, ServFail: t.ServFail, Refused: t.Refused,
			Other: t.Queries - t.NoError - t.NXDomain - t.ServFail - t.Refused,
		},
		Cache: CacheCounts{
			Enabled: t.CacheOn, Hit: t.CacheHit, Miss: t.CacheMiss, Stale: t.CacheStale, CachedFailure: t.CacheCachedFailure,
			Entries: t.CacheEntries, Bytes: t.CacheBytes,
		},
		BudgetExhausted: t.BudgetExhausted,
		OverloadRefused: t.OverloadRefused,
		QueryLogDropped: t.QueryLogDropped,
	}
	if n := t.CacheHit + t.CacheMiss + t.CacheStale + t.CacheCachedFailure; n > 0 {
		r := float64(t.CacheHit+t.CacheCachedFailure) / float64(n)
		st.Cache.HitRatio = &r
	}
	return st
}

func (s *Server) serveStats(w http.ResponseWriter, _ *http.Request) {
	now := time.Now()
	t := s.totals()
	qps, window := s.rate.perSecond(now, t.Queries)
	body, err := json.Marshal(StatsOf(t, s.cfg.Version, s.started, now, qps, window))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeJSON(w, http.StatusOK, append(body, '\n'))
}

// totals reads cfg.Counters, or zeros without them.
func (s *Server) totals() metrics.Totals {
	if s.cfg.Counters == nil {
		return metrics.Totals{}
	}
	return s.cfg.Counters.Totals()
}

// sampleRate records the query counter every rateEvery until stop is
// closed. It is the admin server's own goroutine, started by Start and
// ended by Shutdown.
func (s *Server) sampleRate(stop <-chan struct{}) {
	t := time.NewTicker(rateEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			s.rate.add(now, s.totals().Queries)
		}
	}
}

// rate is the recent history of the query counter, a pure value: the
// sampler adds to it and the stats read it, each with its own clock
// reading.
type rate struct {
	mu      sync.Mutex                       // guards following
	samples [rateWindow/rateEvery + 2]sample // a ring; one more than a window holds, and the one at its edge
	n, next int                              // samples held; where the next goes
}

type sample struct {
	at    time.Time
	total uint64
}

// add records the counter's total at at. Samples come in time order.
func (r *rate) add(at time.Time, total uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.samples[r.next] = sample{at, total}
	r.next = (r.next + 1) % len(r.samples)
	r.n = min(r.n+1, len(r.samples))
}

// perSecond returns the counter's rate between the oldest sample within
// rateWindow of now and (now, total), and the span it covers: the last
// minute once the history is that long, less before. With no sample old
// enough to measure from it returns 0 and 0.
func (r *rate) perSecond(now time.Time, total uint64) (float64, time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := r.n; i > 0; i-- { // oldest first
		s := r.samples[(r.next-i+len(r.samples))%len(r.samples)]
		span := now.Sub(s.at)
		if span > rateWindow || total < s.total {
			continue // too old; or a counter that went back cannot be measured from
		}
		if span <= 0 {
			break
		}
		return float64(total-s.total) / span.Seconds(), span
	}
	return 0, 0
}
