package metrics

import (
	"bytes"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/metrics/metricstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakePool is a pool whose counts the test sets. synced counts Sync calls
// and statusAfterSync records whether every Status followed one.
type fakePool struct {
	status         []actors.Status
	exhausted      uint64
	refused        uint64
	queued         uint64
	queuedSeconds  float64
	synced         atomic.Int32
	statusUnsynced atomic.Int32
	lastStatusSync atomic.Int32
}

func (p *fakePool) Sync() { p.synced.Add(1) }

func (p *fakePool) Status() []actors.Status {
	if n := p.synced.Load(); n == p.lastStatusSync.Load() {
		p.statusUnsynced.Add(1)
	} else {
		p.lastStatusSync.Store(n)
	}
	return p.status
}
func (p *fakePool) BudgetExhaustedTotal() uint64 { return p.exhausted }
func (p *fakePool) ShareRefusedTotal() uint64    { return p.refused }
func (p *fakePool) QueuedTotal() uint64          { return p.queued }
func (p *fakePool) QueuedSeconds() float64       { return p.queuedSeconds }

func scrape(tb testing.TB, m *Metrics) metricstest.Families {
	tb.Helper()
	var b bytes.Buffer
	m.WritePrometheus(&b)
	fs, err := metricstest.Parse(&b)
	if err != nil {
		tb.Fatalf("the exposition does not parse: %v", err)
	}
	return fs
}

func value(tb testing.TB, fs metricstest.Families, name string, labels ...string) float64 {
	tb.Helper()
	v, ok := fs.Value(name, labels...)
	if !ok {
		tb.Fatalf("no single series %s%v", name, labels)
	}
	return v
}

// weird is an upstream name that needs every label escape.
const weird = `we"ird\name` + "\n"

func TestEverySeriesExistsAtStart(t *testing.T) {
	t.Parallel()
	ups := []string{"quad9", weird}
	zones := []string{"lan.", "iot.lan."}
	m := New(Config{Upstreams: ups, Zones: zones})
	m.AttachPool(&fakePool{status: []actors.Status{{Name: "quad9", Slots: 32}, {Name: weird, Slots: 4}}})
	fs := scrape(t, m)
	if err := metricstest.CheckSpec(fs, ups, zones); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"nxdns_upstream_success_total", "nxdns_upstream_failure_total", "nxdns_upstream_in_flight", "nxdns_upstream_backoff"} {
		for _, u := range ups {
			if v := value(t, fs, name, "upstream", u); v != 0 {
				t.Errorf("%s{upstream=%q} = %v at start, want 0", name, u, v)
			}
		}
	}
	if v := value(t, fs, "nxdns_upstream_slots", "upstream", weird); v != 4 {
		t.Errorf("slots of the second upstream %v, want 4", v)
	}
	for _, proto := range []string{"udp", "tcp"} {
		for _, rcode := range []string{"NOERROR", "SERVFAIL", "NXDOMAIN", "REFUSED", "FORMERR", "NOTIMP", "BADVERS"} {
			if v := value(t, fs, "nxdns_queries_total", "proto", proto, "rcode", rcode); v != 0 {
				t.Errorf("queries %s %s = %v at start", proto, rcode, v)
			}
		}
	}
	for _, name := range []string{"go_goroutines", "go_memstats_alloc_bytes", "process_cpu_seconds_total"} {
		if fs[name] == nil {
			t.Errorf("%s: the library's runtime and process metrics are missing", name)
		}
	}
}

func TestPoolFamiliesAreReadAtScrapeAfterSync(t *testing.T) {
	t.Parallel()
	m := New(Config{Upstreams: []string{"a", "b"}})
	p := &fakePool{status: []actors.Status{
		{Successes: 7, Failures: 2, Slots: 8, InFlight: 3},
		{Failures: 5, Slots: 1, InFlight: 1, InBackoff: true},
	}, exhausted: 4, refused: 3, queued: 9, queuedSeconds: 1.25}
	m.AttachPool(p)
	fs := scrape(t, m)
	for _, tc := range []struct {
		name, upstream string
		want           float64
	}{
		{"nxdns_upstream_success_total", "a", 7},
		{"nxdns_upstream_failure_total", "a", 2},
		{"nxdns_upstream_failure_total", "b", 5},
		{"nxdns_upstream_in_flight", "a", 3},
		{"nxdns_upstream_slots", "a", 8},
		{"nxdns_upstream_backoff", "a", 0},
		{"nxdns_upstream_backoff", "b", 1},
	} {
		if v := value(t, fs, tc.name, "upstream", tc.upstream); v != tc.want {
			t.Errorf("%s{upstream=%q} = %v, want %v", tc.name, tc.upstream, v, tc.want)
		}
	}
	for name, want := range map[string]float64{
		"nxdns_upstream_budget_exhausted_total": 4,
		"nxdns_upstream_share_refused_total":    3,
		"nxdns_upstream_queued_total":           9,
		"nxdns_upstream_queued_seconds_total":   1.25,
	} {
		if v := value(t, fs, name); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
	if p.synced.Load() == 0 || p.statusUnsynced.Load() != 0 {
		t.Errorf("Sync called %d times, Status without a Sync before it %d times", p.synced.Load(), p.statusUnsynced.Load())
	}

	p.exhausted = 5
	if v := value(t, scrape(t, m), "nxdns_upstream_budget_exhausted_total"); v != 5 {
		t.Errorf("after the pool's counter moved: %v, want 5", v)
	}
}

func TestAttemptsCountedByOutcome(t *testing.T) {
	t.Parallel()
	m := New(Config{Upstreams: []string{"a", "b"}})
	m.ObserveAttempt(0, actors.OutcomeExpired, 100*time.Millisecond)
	m.ObserveAttempt(1, actors.OutcomeCensored, 50*time.Millisecond)
	m.ObserveAttempt(1, actors.OutcomeAnswer, 2*time.Millisecond)
	m.ObserveAttempt(1, actors.OutcomeAnswer, 3*time.Millisecond)
	m.ObserveAttempt(2, actors.OutcomeAnswer, time.Millisecond) // no such upstream: ignored
	fs := scrape(t, m)
	want := map[[2]string]float64{{"a", "expired"}: 1, {"b", "censored"}: 1, {"b", "answer"}: 2}
	for _, u := range []string{"a", "b"} {
		for _, o := range metricstest.AttemptOutcomes {
			if v := value(t, fs, "nxdns_upstream_attempts_total", "upstream", u, "outcome", o); v != want[[2]string{u, o}] {
				t.Errorf("attempts %s %s = %v, want %v", u, o, v, want[[2]string{u, o}])
			}
		}
	}
	if v := value(t, fs, "nxdns_upstream_attempt_duration_seconds_count", "upstream", "b"); v != 3 {
		t.Errorf("b's attempt durations: %v observations, want 3", v)
	}
	if v := value(t, fs, "nxdns_upstream_attempt_duration_seconds_bucket", "upstream", "a", "le", "0.1"); v != 1 {
		t.Errorf("a's 100 ms attempt is in the le=0.1 bucket %v times, want 1", v)
	}
}

func TestQueriesZonesAndEvents(t *testing.T) {
	t.Parallel()
	m := New(Config{Upstreams: []string{"a"}, Zones: []string{"lan."}})
	m.Query("udp", 0, time.Millisecond)
	m.Query("udp", 0, time.Millisecond)
	m.Query("tcp", 2, 2*time.Second)
	m.Query("udp", 9, time.Millisecond)    // NOTAUTH: a series made on first use
	m.Query("udp", 3841, time.Millisecond) // beyond the cache
	m.ForwardZone("lan.", "timeout")
	m.ForwardZone("other.", "answer") // not configured: still counted
	m.OverloadRefused()
	m.Panic()
	m.Panic()
	m.QueryLogDropped()
	m.QueryLogLost(3)
	fs := scrape(t, m)
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"nxdns_queries_total", []string{"proto", "udp", "rcode", "NOERROR"}, 2},
		{"nxdns_queries_total", []string{"proto", "tcp", "rcode", "SERVFAIL"}, 1},
		{"nxdns_queries_total", []string{"proto", "udp", "rcode", "NOTAUTH"}, 1},
		{"nxdns_queries_total", []string{"proto", "udp", "rcode", "RCODE3841"}, 1},
		{"nxdns_query_duration_seconds_count", nil, 5},
		{"nxdns_query_duration_seconds_bucket", []string{"le", "1"}, 4},
		{"nxdns_forward_zone_queries_total", []string{"zone", "lan.", "outcome", "timeout"}, 1},
		{"nxdns_forward_zone_queries_total", []string{"zone", "lan.", "outcome", "answer"}, 0},
		{"nxdns_forward_zone_queries_total", []string{"zone", "other.", "outcome", "answer"}, 1},
		{"nxdns_overload_refused_total", nil, 1},
		{"nxdns_panics_total", nil, 2},
		{"nxdns_query_log_dropped_total", nil, 4},
	} {
		if v := value(t, fs, tc.name, tc.labels...); v != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, v, tc.want)
		}
	}
}

// Two metric sets in one process count separately: tests run in parallel.
func TestSetsAreIndependent(t *testing.T) {
	t.Parallel()
	a, b := New(Config{Upstreams: []string{"x"}}), New(Config{Upstreams: []string{"x"}})
	a.Panic()
	a.ObserveAttempt(0, actors.OutcomeAnswer, time.Millisecond)
	if v := value(t, scrape(t, b), "nxdns_panics_total"); v != 0 {
		t.Errorf("b sees a's panic: %v", v)
	}
	if v := value(t, scrape(t, b), "nxdns_upstream_attempts_total", "upstream", "x", "outcome", "answer"); v != 0 {
		t.Errorf("b sees a's attempt: %v", v)
	}
}

func TestQueryPathAllocatesNothing(t *testing.T) {
	m := New(Config{Upstreams: []string{"a"}, Zones: []string{"lan."}})
	m.Query("udp", 3, time.Millisecond) // warm the lazily made NXDOMAIN series
	n := testing.AllocsPerRun(200, func() {
		m.Query("udp", 0, time.Millisecond)
		m.Query("tcp", 3, time.Millisecond)
		m.ObserveAttempt(0, actors.OutcomeAnswer, time.Millisecond)
		m.ForwardZone("lan.", "answer")
	})
	if n != 0 {
		t.Errorf("%v allocations per query, want 0", n)
	}
}

// Without a pool attached the pool's series still exist, at zero.
func TestNoPoolYet(t *testing.T) {
	t.Parallel()
	m := New(Config{Upstreams: []string{"a"}})
	fs := scrape(t, m)
	if err := metricstest.CheckSpec(fs, []string{"a"}, nil); err != nil {
		t.Fatal(err)
	}
	if v := value(t, fs, "nxdns_upstream_slots", "upstream", "a"); v != 0 {
		t.Errorf("slots %v, want 0 without a pool", v)
	}
}

// The TYPE lines are what make the pool's counters counters.
func TestPoolCountersRenderAsCounters(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	New(Config{Upstreams: []string{"a"}}).WritePrometheus(&b)
	text := b.String()
	for _, line := range []string{
		"# TYPE nxdns_upstream_success_total counter",
		"# TYPE nxdns_upstream_budget_exhausted_total counter",
		"# TYPE nxdns_upstream_share_refused_total counter",
		"# TYPE nxdns_upstream_queued_seconds_total counter",
		"# TYPE nxdns_upstream_in_flight gauge",
		"# TYPE nxdns_query_duration_seconds histogram",
	} {
		if !strings.Contains(text, line+"\n") {
			t.Errorf("no %q line", line)
		}
	}
}

func TestParserRefusesWhatPrometheusRefuses(t *testing.T) {
	t.Parallel()
	for name, text := range map[string]string{
		"split family":     "a 1\nb 1\na{x=\"1\"} 2\n",
		"second TYPE":      "# TYPE a counter\n# TYPE a counter\na 1\n",
		"TYPE too late":    "a 1\n# TYPE a counter\n",
		"duplicate":        "a{x=\"1\"} 1\na{x=\"1\"} 2\n",
		"no +Inf":          "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_count 1\n",
		"bad escape":       "a{x=\"\\t\"} 1\n",
		"bad value":        "a one\n",
		"count mismatch":   "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_count 1\n",
		"unquoted label":   "a{x=1} 1\n",
		"negative counter": "# TYPE a counter\na -1\n",
		"second HELP":      "# HELP a one\n# HELP a two\na 1\n",
	} {
		if _, err := metricstest.Parse(strings.NewReader(text)); err == nil {
			t.Errorf("%s: parsed without error", name)
		}
	}
	fs, err := metricstest.Parse(strings.NewReader("# HELP a\n# TYPE a gauge\na{x=\"q\\\"\\n\", y=\"2\",} 1.5e3\n"))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := fs.Value("a", "x", "q\"\n", "y", "2"); !ok || v != 1500 {
		t.Errorf("value %v, %v", v, ok)
	}
	if err := metricstest.CheckSpec(fs, nil, nil); err == nil {
		t.Error("CheckSpec accepted an exposition without nxdnsd's families")
	}
}

func BenchmarkQuery(b *testing.B) {
	m := New(Config{Upstreams: []string{"a"}})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.ObserveAttempt(0, actors.OutcomeAnswer, 3*time.Millisecond)
			m.Query("udp", 0, 4*time.Millisecond)
		}
	})
}

func BenchmarkScrape(b *testing.B) {
	ups := make([]string, 8)
	for i := range ups {
		ups[i] = "upstream-" + string(rune('a'+i))
	}
	m := New(Config{Upstreams: ups})
	status := make([]actors.Status, len(ups))
	m.AttachPool(&fakePool{status: status})
	var buf bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		m.WritePrometheus(&buf)
	}
}
