package daemon

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/metrics/metricstest"
	"github.com/nxdnsd/nxdnsd/wire/transport"
	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// Each source names itself, and upstream is the pool's attribution or the
// forward zone's resolver.
func TestQueryLogSources(t *testing.T) {
	pool := wiretest.NewServer(t, wiretest.Answer())
	lan := wiretest.NewServer(t, wiretest.Answer())
	s := startObserved(t, upstreamTOML(pool.Addr)+fmt.Sprintf(`
[[forward_zones]]
zone = "lan."
resolver = %q
[[local_records]]
name = "printer.home."
type = "A"
value = "192.168.1.9"
`, lan.Addr), false, options{})

	for _, q := range []struct {
		proto, name string
		qtype       uint16
	}{
		{"udp", "localhost.", dns.TypeA},
		{"tcp", "printer.home.", dns.TypeA},
		{"udp", "nas.lan.", dns.TypeAAAA},
		{"udp", "example.com.", dns.TypeA},
	} {
		ask(t, q.proto, s.addr(q.proto), wiretest.Query(q.name, q.qtype))
	}
	lines := s.logLines(t)
	want := []struct{ qname, proto, qtype, source, upstream string }{
		{"localhost.", "udp", "A", "special", "<null>"},
		{"printer.home.", "tcp", "A", "local", "<null>"},
		{"nas.lan.", "udp", "AAAA", "forward_zone", lan.Addr},
		{"example.com.", "udp", "A", "pool", "up0"},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d", len(lines), len(want))
	}
	for i, w := range want {
		l := lines[i]
		got := []string{l.qname(), l.Proto, deref(l.QType), l.source(), l.upstream(), l.Rcode}
		if exp := []string{w.qname, w.proto, w.qtype, w.source, w.upstream, "NOERROR"}; !slices.Equal(got, exp) {
			t.Errorf("line %d: %v, want %v", i, got, exp)
		}
		if ts, err := time.Parse(time.RFC3339Nano, l.TS); err != nil || !strings.HasSuffix(l.TS, "Z") || time.Since(ts) > time.Minute {
			t.Errorf("line %d: ts %q (%v)", i, l.TS, err)
		}
		if l.Client == nil || !strings.HasPrefix(*l.Client, "127.0.0.1:") || l.DurationMS <= 0 {
			t.Errorf("line %d: client %v, duration %v ms", i, deref(l.Client), l.DurationMS)
		}
		if l.Attempts != nil || l.QueuedMS != nil {
			t.Errorf("line %d carries a trail with query_log.attempts off", i)
		}
	}
}

// A full expiry on up0 is recorded and blamed; the truncated expiry on up1
// that follows is censored: the query ends BudgetExhausted, still blamed
// on up0, and the budget counter moves once.
func TestQueryLogFullThenTruncatedExpiry(t *testing.T) {
	a := wiretest.NewServer(t, wiretest.Stall)
	b := wiretest.NewServer(t, wiretest.Stall)
	// The second attempt must start before the total budget runs out: a
	// loaded machine running -race may notice the first expiry late, so
	// the budget leaves it 150 ms for that (it had 50 ms and once failed
	// on CI).
	s := startObserved(t, upstreamTOML(a.Addr, b.Addr)+"[upstream]\nattempt_timeout_ms = 250\ntotal_timeout_ms = 400\n", true, options{})
	if r := ask(t, "udp", s.udp, wiretest.Query("slow.example.", dns.TypeA)); r.Rcode != dns.RcodeServerFailure {
		t.Fatalf("rcode %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}
	lines := s.logLines(t)
	if len(lines) != 1 {
		t.Fatalf("%d lines", len(lines))
	}
	l := lines[0]
	if l.upstream() != "up0" || l.Rcode != "SERVFAIL" || len(l.Attempts) != 2 ||
		l.Attempts[0].Outcome != "expired" || l.Attempts[1].Outcome != "censored" {
		t.Errorf("line %+v, want blamed on up0 after expired then censored", l)
	}

	fs := s.scrape(t)
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"nxdns_upstream_budget_exhausted_total", nil, 1},
		{"nxdns_upstream_failure_total", []string{"upstream", "up0"}, 1},
		{"nxdns_upstream_failure_total", []string{"upstream", "up1"}, 0}, // censored: not the upstream's fault
		{"nxdns_upstream_attempts_total", []string{"upstream", "up0", "outcome", "expired"}, 1},
		{"nxdns_upstream_attempts_total", []string{"upstream", "up1", "outcome", "censored"}, 1},
		{"nxdns_queries_total", []string{"proto", "udp", "rcode", "SERVFAIL"}, 1},
	} {
		if v := metricValue(t, fs, tc.name, tc.labels...); v != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, v, tc.want)
		}
	}
}

// holding wraps upstream 0's transport so that a query for hold. keeps its
// slot, whatever its deadline, until release is closed: the one way a slot
// outlives a later query's whole budget, so that query's wait ends at its
// deadline with nothing attempted.
func holding(entered chan<- struct{}, release <-chan struct{}) func(int, transport.Exchanger) transport.Exchanger {
	return func(i int, t transport.Exchanger) transport.Exchanger {
		if i != 0 {
			return t
		}
		return transport.ExchangerFunc(func(ctx context.Context, q *transport.Query, expiry time.Time) (transport.Answer, error) {
			if strings.HasPrefix(q.Msg.Question[0].Name, "hold.") {
				entered <- struct{}{}
				<-release
				if err := ctx.Err(); err != nil {
					return transport.Answer{}, err
				}
				if !expiry.IsZero() && !time.Now().Before(expiry) {
					return transport.Answer{}, context.DeadlineExceeded // a late timeout of the holder's own: its full attempt expired
				}
			}
			return t.Exchange(ctx, q, expiry)
		})
	}
}

func TestQueryLogQueueOnlyExhaustionNamesNobody(t *testing.T) {
	entered := make(chan struct{}, 1)
	release, releaseAll := releaser(t)
	a := wiretest.NewServer(t, wiretest.Answer())
	s := startObserved(t, slotsTOML(1, a.Addr)+"[upstream]\nattempt_timeout_ms = 100\ntotal_timeout_ms = 150\n", true,
		options{exchanger: holding(entered, release)})
	first := askAsync(t, s.udp, "hold.example.")
	<-entered
	if r := ask(t, "udp", s.udp, wiretest.Query("queued.example.", dns.TypeA)); r.Rcode != dns.RcodeServerFailure {
		t.Fatalf("the queued query: %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}
	releaseAll()
	<-first

	var queued *logLine
	lines := s.logLines(t)
	for i := range lines {
		if lines[i].qname() == "queued.example." {
			queued = &lines[i]
		}
	}
	if queued == nil {
		t.Fatalf("no line for the queued query in %+v", lines)
	}
	if queued.Upstream != nil || len(queued.Attempts) != 0 || queued.source() != "pool" || queued.QueuedMS == nil || *queued.QueuedMS <= 0 {
		t.Errorf("queue-only exhaustion logged as %+v; want upstream null, no attempt, the wait in queued_ms", *queued)
	}
	fs := s.scrape(t)
	if v := metricValue(t, fs, "nxdns_upstream_budget_exhausted_total"); v != 1 {
		t.Errorf("budget exhausted %v, want 1", v)
	}
	if v := metricValue(t, fs, "nxdns_upstream_queued_total"); v != 1 {
		t.Errorf("queued %v, want 1", v)
	}
}

// With query_log.attempts the trail shows each attempt in order, and the
// attempts counter agrees with the trails.
func TestQueryLogAttemptTrail(t *testing.T) {
	a := wiretest.NewServer(t, wiretest.Stall)
	b := wiretest.NewServer(t, wiretest.Answer())
	s := startObserved(t, upstreamTOML(a.Addr, b.Addr)+"[upstream]\nattempt_timeout_ms = 100\ntotal_timeout_ms = 1000\nfailure_threshold = 5\n", true, options{})
	for range 2 {
		if r := ask(t, "udp", s.udp, wiretest.Query("example.com.", dns.TypeA)); r.Rcode != dns.RcodeSuccess {
			t.Fatalf("rcode %s", dns.RcodeToString[r.Rcode])
		}
	}
	lines := s.logLines(t)
	for _, l := range lines {
		if l.upstream() != "up1" || l.QueuedMS == nil || *l.QueuedMS != 0 || len(l.Attempts) != 2 {
			t.Fatalf("line %+v: want attributed to up1, not queued, two attempts", l)
		}
		first, second := l.Attempts[0], l.Attempts[1]
		if deref(first.Upstream) != "up0" || first.Outcome != "expired" || first.MS < 100 {
			t.Errorf("first attempt %+v, want up0 expired after its full 100 ms", first)
		}
		if deref(second.Upstream) != "up1" || second.Outcome != "answer" || second.MS <= 0 || second.MS > l.DurationMS {
			t.Errorf("second attempt %+v, want up1's answer within the query's %v ms", second, l.DurationMS)
		}
	}
	checkAttemptsAgree(t, lines, s.scrape(t), []string{"up0", "up1"})
}

// checkAttemptsAgree compares nxdns_upstream_attempts_total with the
// attempts the trails of lines show.
func checkAttemptsAgree(tb testing.TB, lines []logLine, fs metricstest.Families, upstreams []string) {
	tb.Helper()
	trail := map[[2]string]float64{}
	for _, l := range lines {
		for _, a := range l.Attempts {
			trail[[2]string{deref(a.Upstream), a.Outcome}]++
		}
	}
	for _, u := range upstreams {
		for _, o := range metricstest.AttemptOutcomes {
			if v := metricValue(tb, fs, "nxdns_upstream_attempts_total", "upstream", u, "outcome", o); v != trail[[2]string{u, o}] {
				tb.Errorf("attempts %s %s: metric %v, trails %v", u, o, v, trail[[2]string{u, o}])
			}
		}
	}
}

// A stalled query-log writer costs lines, never answers; the lines it
// accepted are all written at shutdown.
func TestQueryLogStalledWriter(t *testing.T) {
	const buffer, queries = 4, 20
	w := newStalledWriter()
	t.Cleanup(w.unstall)
	s := startObserved(t, upstreamTOML("192.0.2.1:53")+"[[local_records]]\nname = \"nas.home.\"\ntype = \"A\"\nvalue = \"192.168.1.10\"\n", false,
		options{queryLog: w, queryLogBuffer: buffer})

	ask(t, "udp", s.udp, wiretest.Query("nas.home.", dns.TypeA))
	<-w.entered // the writer hangs on the first line
	for range queries - 1 {
		if r := ask(t, "udp", s.udp, wiretest.Query("nas.home.", dns.TypeA)); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			t.Fatalf("answer with the log stalled: %v", r)
		}
	}
	dropped := metricValue(t, s.scrape(t), "nxdns_query_log_dropped_total")
	if dropped != queries-1-buffer {
		t.Errorf("dropped %v, want %d: every line past the %d buffers", dropped, queries-1-buffer, buffer)
	}

	w.unstall()
	if err := s.d.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(parseLines(t, w.bytes())); n+int(dropped) != queries {
		t.Errorf("%d lines written and %v dropped for %d queries: lines were lost at shutdown", n, dropped, queries)
	}
}

// Reopen, as SIGUSR1 triggers it, starts a new file after a rotation.
func TestReopenStartsANewFile(t *testing.T) {
	up := wiretest.NewServer(t, wiretest.Answer())
	s := startObserved(t, upstreamTOML(up.Addr), false, options{})
	ask(t, "udp", s.udp, wiretest.Query("before.example.", dns.TypeA))
	s.d.qlog.Sync()
	if err := os.Rename(s.logPath, s.logPath+".1"); err != nil {
		t.Fatal(err)
	}
	if err := s.d.Reopen(); err != nil {
		t.Fatal(err)
	}
	ask(t, "udp", s.udp, wiretest.Query("after.example.", dns.TypeA))
	rotated, err := os.ReadFile(s.logPath + ".1")
	if err != nil {
		t.Fatal(err)
	}
	if l := parseLines(t, rotated); len(l) != 1 || l[0].qname() != "before.example." {
		t.Errorf("rotated file: %+v", l)
	}
	if l := s.logLines(t); len(l) != 1 || l[0].qname() != "after.example." {
		t.Errorf("new file: %+v", l)
	}
}
