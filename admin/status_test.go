package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nxdnsd/nxdnsd/admin/admintest"
	"github.com/nxdnsd/nxdnsd/metrics"
)

// fakeQueries keeps n queries, named q0 (the newest) to q{n-1}.
type fakeQueries struct{ n int }

func (q fakeQueries) Cap() int { return q.n }

func (q fakeQueries) AppendJSON(b []byte, limit int) []byte {
	for i := range min(limit, q.n) {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `{"ts":"2026-11-29T18:00:00.000000Z","client":"192.0.2.7:5300","proto":"udp","qname":"q%d.","qtype":"A",`+
			`"rcode":"NOERROR","source":"pool","upstream":"b","duration_ms":2.5,"queued_ms":0,`+
			`"attempts":[{"upstream":"a","outcome":"peer_fault","ms":1.5,"error":"refused"},{"upstream":"b","outcome":"answer","ms":1}]}`, i)
	}
	return b
}

// fakeCounters returns fixed totals.
type fakeCounters struct{ t metrics.Totals }

func (c fakeCounters) Totals() metrics.Totals { return c.t }

func startWith(tb testing.TB, cfg Config) string {
	tb.Helper()
	cfg.Listen = "127.0.0.1:0"
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New(metrics.Config{})
	}
	if cfg.Pool == nil {
		cfg.Pool = &fakePool{}
	}
	s := New(cfg)
	if err := s.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := s.Shutdown(context.Background()); err != nil {
			tb.Errorf("shutdown: %v", err)
		}
	})
	return "http://" + s.Addr().String()
}

func TestQueriesNewestFirstUpToLimit(t *testing.T) {
	base := startWith(t, Config{Queries: fakeQueries{n: 3}})
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"", []string{"q0.", "q1.", "q2."}},
		{"?limit=2", []string{"q0.", "q1."}},
		{"?limit=10", []string{"q0.", "q1.", "q2."}},
		{"?limit=0", nil},
	} {
		resp, body := get(t, "GET", base+"/api/queries"+tc.query)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("%s: %d %q", tc.query, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		admintest.Require(t, "/api/queries", 200, body)
		var got struct {
			Capacity int
			Queries  []struct{ QName string }
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, q := range got.Queries {
			names = append(names, q.QName)
		}
		if got.Capacity != 3 || fmt.Sprint(names) != fmt.Sprint(tc.want) {
			t.Errorf("%q: capacity %d, queries %v; want 3, %v", tc.query, got.Capacity, names, tc.want)
		}
	}
	for _, bad := range []string{"?limit=-1", "?limit=ten", "?limit=1.5"} {
		if resp, _ := get(t, "GET", base+"/api/queries"+bad); resp.StatusCode != 400 {
			t.Errorf("%s: %d, want 400", bad, resp.StatusCode)
		}
	}
}

// admin.recent_queries = 0: an empty list that says none are kept.
func TestQueriesOff(t *testing.T) {
	base := startWith(t, Config{})
	resp, body := get(t, "GET", base+"/api/queries?limit=5")
	admintest.Require(t, "/api/queries", resp.StatusCode, body)
	if string(body) != `{"capacity":0,"queries":[]}`+"\n" {
		t.Errorf("body %s", body)
	}
}

func TestStatsSumTheCounters(t *testing.T) {
	tot := metrics.Totals{
		Queries: 20, NoError: 10, NXDomain: 4, ServFail: 3, Refused: 2,
		CacheOn: true, CacheHit: 6, CacheMiss: 3, CacheStale: 1, CacheCachedFailure: 2, CacheEntries: 7, CacheBytes: 900,
		BudgetExhausted: 1, OverloadRefused: 2, QueryLogDropped: 3,
	}
	base := startWith(t, Config{Counters: fakeCounters{tot}, Version: "1.2.3"})
	resp, body := get(t, "GET", base+"/api/stats")
	admintest.Require(t, "/api/stats", resp.StatusCode, body)
	var st Stats
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatal(err)
	}
	q, c := st.Queries, st.Cache
	if q != (QueryCounts{Total: 20, NoError: 10, NXDomain: 4, ServFail: 3, Refused: 2, Other: 1}) {
		t.Errorf("queries %+v", q)
	}
	if !c.Enabled || c.HitRatio == nil || *c.HitRatio != 8.0/12 || c.Stale != 1 || c.Entries != 7 || c.Bytes != 900 {
		t.Errorf("cache %+v (hit ratio %v), want (6+2)/12", c, c.HitRatio)
	}
	if st.Version != "1.2.3" || st.BudgetExhausted != 1 || st.OverloadRefused != 2 || st.QueryLogDropped != 3 {
		t.Errorf("stats %+v", st)
	}
	if st.StartedAt.After(st.Now) {
		t.Errorf("started %v after now %v", st.StartedAt, st.Now)
	}

	// Before any lookup the ratio is unknown, not 0.
	none := StatsOf(metrics.Totals{}, "", t0, t0, 0, 0)
	if none.Cache.HitRatio != nil {
		t.Errorf("hit ratio %v without a lookup, want null", *none.Cache.HitRatio)
	}
	b, _ := json.Marshal(none)
	admintest.Require(t, "/api/stats", 200, b)
}

// The rate is over the last minute once the history is a minute long,
// over what there is before, and nothing from a single reading.
func TestRateOverTheLastMinute(t *testing.T) {
	var r rate
	if qps, w := r.perSecond(t0, 0); qps != 0 || w != 0 {
		t.Errorf("no sample: %v over %v", qps, w)
	}
	r.add(t0, 0)
	if qps, w := r.perSecond(t0, 0); qps != 0 || w != 0 {
		t.Errorf("no time passed: %v over %v", qps, w)
	}
	if qps, w := r.perSecond(t0.Add(10*time.Second), 50); qps != 5 || w != 10*time.Second {
		t.Errorf("after 10 s: %v over %v, want 5 over 10s", qps, w)
	}
	// 100 queries a second from t0 + 5 min on, sampled every 5 s: only the
	// last minute counts, not the quiet start.
	total := uint64(0)
	for at := rateEvery; at <= 10*time.Minute; at += rateEvery {
		if at > 5*time.Minute {
			total += 500
		}
		r.add(t0.Add(at), total)
	}
	now := t0.Add(10*time.Minute + 2*time.Second)
	qps, w := r.perSecond(now, total+200)
	if w != 57*time.Second || qps != float64(12*500-500+200)/57 {
		t.Errorf("%v over %v, want the 57 s since the oldest sample of the minute", qps, w)
	}
	// A counter that went back (a test's fake, never the metrics) yields
	// no rate rather than a wrapped one.
	if qps, _ := r.perSecond(now, 1); qps != 0 {
		t.Errorf("counter went back: %v", qps)
	}
}

// The page is one file that loads nothing from anywhere: no src or href
// but its own fragments, and a policy that forbids the rest.
func TestStatusPageIsSelfContained(t *testing.T) {
	base := startWith(t, Config{})
	resp, body := get(t, "GET", base+"/")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "connect-src 'self'") {
		t.Errorf("policy %q", csp)
	}
	for _, m := range regexp.MustCompile(`(?i)\b(src|href)\s*=\s*["']?([^"'\s>]*)`).FindAllStringSubmatch(string(body), -1) {
		t.Errorf("the page loads %s=%q", m[1], m[2])
	}
	for _, api := range []string{"/api/health", "/api/stats", "/api/queries"} {
		if !strings.Contains(string(body), api) {
			t.Errorf("the page does not read %s", api)
		}
	}
	if resp, _ := get(t, "GET", base+"/index.html"); resp.StatusCode != 404 {
		t.Errorf("GET /index.html: %d, want 404 (the page is at / only)", resp.StatusCode)
	}
}
