package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/admin"
	"github.com/nxdnsd/nxdnsd/admin/admintest"
	"github.com/nxdnsd/nxdnsd/config"
	"github.com/nxdnsd/nxdnsd/metrics/metricstest"
	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// observed is a daemon running on loopback with its admin server on a
// port of its own and, unless src turns it off, its query log in a file.
type observed struct {
	*started
	admin   string // "http://127.0.0.1:PORT"
	logPath string // the query log file, "" when the test gave a writer
}

// startObserved runs a daemon on src (TOML without [admin], [query_log]
// or server.listen) with the admin server on 127.0.0.1:0, the query log in a
// temporary file (attempts as asked) unless opts gives a writer.
func startObserved(tb testing.TB, src string, attempts bool, opts options) *observed {
	tb.Helper()
	o := &observed{logPath: filepath.Join(tb.TempDir(), "query.log")}
	if opts.queryLog != nil {
		o.logPath = ""
	}
	const listen = "[server]\nlisten = [\"127.0.0.1:0\"]\n"
	if strings.Contains(src, "[server]\n") {
		src = strings.Replace(src, "[server]\n", listen, 1)
	} else {
		src = listen + src
	}
	src = fmt.Sprintf("[admin]\nlisten = \"127.0.0.1:0\"\n[query_log]\npath = %q\nattempts = %v\n%s",
		orElse(o.logPath, "unused"), attempts, src)
	o.started = runDaemon(tb, src, opts)
	o.admin = "http://" + o.started.d.AdminAddr().String()
	return o
}

func orElse(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}

// get fetches path from the admin server.
func (o *observed) get(tb testing.TB, path string) (int, []byte) {
	tb.Helper()
	resp, err := http.Get(o.admin + path)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return resp.StatusCode, body
}

// scrape reads /metrics and parses it strictly.
func (o *observed) scrape(tb testing.TB) metricstest.Families {
	tb.Helper()
	code, body := o.get(tb, "/metrics")
	if code != http.StatusOK {
		tb.Fatalf("/metrics: %d", code)
	}
	fs, err := metricstest.Parse(bytes.NewReader(body))
	if err != nil {
		tb.Fatalf("/metrics does not parse: %v", err)
	}
	return fs
}

// health reads /api/health and holds it to openapi.yaml.
func (o *observed) health(tb testing.TB) (int, admin.Health) {
	tb.Helper()
	code, body := o.get(tb, "/api/health")
	admintest.RequireHealth(tb, code, body)
	var h admin.Health
	if err := json.Unmarshal(body, &h); err != nil {
		tb.Fatal(err)
	}
	return code, h
}

// logLine is one query-log line as an outside reader decodes it.
type logLine struct {
	TS         string   `json:"ts"`
	Client     *string  `json:"client"`
	ClientName string   `json:"client_name"`
	Rebind     bool     `json:"rebind"`
	Proto      string   `json:"proto"`
	QName      *string  `json:"qname"`
	QType      *string  `json:"qtype"`
	Rcode      string   `json:"rcode"`
	Source     *string  `json:"source"`
	List       *string  `json:"list"`
	Upstream   *string  `json:"upstream"`
	DurationMS float64  `json:"duration_ms"`
	QueuedMS   *float64 `json:"queued_ms"`
	Attempts   []struct {
		Upstream *string `json:"upstream"`
		Outcome  string  `json:"outcome"`
		MS       float64 `json:"ms"`
		Error    string  `json:"error"`
	} `json:"attempts"`
}

func (l logLine) upstream() string { return deref(l.Upstream) }
func (l logLine) source() string   { return deref(l.Source) }
func (l logLine) qname() string    { return deref(l.QName) }

func deref(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}

// logLines waits for the query log to write every line accepted so far
// and returns them all.
func (o *observed) logLines(tb testing.TB) []logLine {
	tb.Helper()
	o.d.qlog.Sync()
	data, err := os.ReadFile(o.logPath)
	if err != nil {
		tb.Fatal(err)
	}
	return parseLines(tb, data)
}

func parseLines(tb testing.TB, data []byte) []logLine {
	tb.Helper()
	var out []logLine
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var l logLine
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields() // the format is exactly what the docs say
		if err := dec.Decode(&l); err != nil {
			tb.Fatalf("query-log line %q: %v", sc.Text(), err)
		}
		out = append(out, l)
	}
	return out
}

// byLabel returns a handler running hs[first label of the query name] (in
// lower case), or def when there is none: one fake upstream that answers
// some names and stalls others.
func byLabel(def wiretest.Handler, hs map[string]wiretest.Handler) wiretest.Handler {
	return func(w *wiretest.Writer, q *dns.Msg) {
		label, _, _ := strings.Cut(strings.ToLower(q.Question[0].Name), ".")
		if h, ok := hs[label]; ok {
			h(w, q)
			return
		}
		def(w, q)
	}
}

// askAsync sends a query on its own goroutine; the channel gets the answer.
func askAsync(tb testing.TB, addr, name string) <-chan *dns.Msg {
	tb.Helper()
	ch := make(chan *dns.Msg, 1)
	go func() {
		c := &dns.Client{Net: "udp", Timeout: 5 * time.Second}
		r, _, err := c.Exchange(wiretest.Query(name, dns.TypeA), addr)
		if err != nil {
			r = nil
		}
		ch <- r
	}()
	return ch
}

// releaser closes a channel once, however many times it is called: a test
// releases its fakes itself and again, in case it failed first, in cleanup.
func releaser(tb testing.TB) (ch chan struct{}, release func()) {
	ch = make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(ch) }) }
	tb.Cleanup(release)
	return ch, release
}

func metricValue(tb testing.TB, fs metricstest.Families, name string, labels ...string) float64 {
	tb.Helper()
	v, ok := fs.Value(name, labels...)
	if !ok {
		tb.Fatalf("no single series %s%v", name, labels)
	}
	return v
}

func TestMetricsEverySeriesFromStart(t *testing.T) {
	a := wiretest.NewServer(t, wiretest.Answer())
	b := wiretest.NewServer(t, wiretest.Answer())
	lan := wiretest.NewServer(t, wiretest.Answer())
	s := startObserved(t, upstreamTOML(a.Addr, b.Addr)+fmt.Sprintf("[[forward_zones]]\nzone = \"Lan\"\nresolver = %q\n", lan.Addr), false, options{})
	fs := s.scrape(t)
	if err := metricstest.CheckSpec(fs, []string{"up0", "up1"}, []string{"lan."}); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"up0", "up1"} {
		if v := metricValue(t, fs, "nxdns_upstream_slots", "upstream", u); v != 32 {
			t.Errorf("%s slots %v, want the default 32", u, v)
		}
		if v := metricValue(t, fs, "nxdns_upstream_success_total", "upstream", u); v != 0 {
			t.Errorf("%s successes %v before any query", u, v)
		}
	}

	ask(t, "udp", s.udp, wiretest.Query("example.com.", dns.TypeA))
	ask(t, "tcp", s.tcp, wiretest.Query("nas.lan.", dns.TypeA))
	fs = s.scrape(t)
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"nxdns_queries_total", []string{"proto", "udp", "rcode", "NOERROR"}, 1},
		{"nxdns_queries_total", []string{"proto", "tcp", "rcode", "NOERROR"}, 1},
		{"nxdns_query_duration_seconds_count", nil, 2},
		{"nxdns_upstream_success_total", []string{"upstream", "up0"}, 1},
		{"nxdns_upstream_attempts_total", []string{"upstream", "up0", "outcome", "answer"}, 1},
		{"nxdns_upstream_attempt_duration_seconds_count", []string{"upstream", "up0"}, 1},
		{"nxdns_forward_zone_queries_total", []string{"zone", "lan.", "outcome", "answer"}, 1},
		{"nxdns_upstream_in_flight", []string{"upstream", "up0"}, 0},
	} {
		if v := metricValue(t, fs, tc.name, tc.labels...); v != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, v, tc.want)
		}
	}
}

// slotsTOML is upstreamTOML with up0's slots set to n.
func slotsTOML(n int, addrs ...string) string {
	return strings.Replace(upstreamTOML(addrs...), "name = \"up0\"\n", fmt.Sprintf("name = \"up0\"\nslots = %d\n", n), 1)
}

// A saturated upstream is skipped without waiting: the queued counters do
// not move; in flight shows the held slot.
func TestMetricsNonBlockingSkipIsNotQueued(t *testing.T) {
	held := make(chan string, 1)
	release, releaseAll := releaser(t)
	a := wiretest.NewServer(t, byLabel(wiretest.Answer(), map[string]wiretest.Handler{
		"hold": wiretest.Notify(held, wiretest.Gate(release, wiretest.Answer())),
	}))
	b := wiretest.NewServer(t, wiretest.Answer())
	s := startObserved(t, slotsTOML(1, a.Addr, b.Addr), false, options{})

	first := askAsync(t, s.udp, "hold.example.")
	<-held // up0's only slot is taken
	if r := ask(t, "udp", s.udp, wiretest.Query("skip.example.", dns.TypeA)); r.Rcode != dns.RcodeSuccess {
		t.Fatalf("skip: %s", dns.RcodeToString[r.Rcode])
	}
	fs := s.scrape(t)
	for name, want := range map[string]float64{"nxdns_upstream_queued_total": 0, "nxdns_upstream_queued_seconds_total": 0} {
		if v := metricValue(t, fs, name); v != want {
			t.Errorf("%s = %v after a non-blocking skip, want %v", name, v, want)
		}
	}
	if v := metricValue(t, fs, "nxdns_upstream_in_flight", "upstream", "up0"); v != 1 {
		t.Errorf("up0 in flight %v while holding its slot, want 1", v)
	}
	if v := metricValue(t, fs, "nxdns_upstream_success_total", "upstream", "up1"); v != 1 {
		t.Errorf("up1 successes %v, want 1: it answered the skip", v)
	}
	releaseAll()
	if r := <-first; r == nil || r.Rcode != dns.RcodeSuccess {
		t.Errorf("the held query: %v", r)
	}
}

// With every slot taken the query waits, and the wait is counted once,
// with its time, however it ends.
func TestMetricsBlockingWaitIsQueued(t *testing.T) {
	held := make(chan string, 1)
	a := wiretest.NewServer(t, byLabel(wiretest.Answer(), map[string]wiretest.Handler{
		"hold": wiretest.Notify(held, wiretest.Stall),
	}))
	// The holder keeps the only slot for its whole attempt and fails (a
	// full expiry); the waiter, sent just after, gets the slot when that
	// attempt ends, with most of its budget left, and is answered.
	s := startObserved(t, slotsTOML(1, a.Addr)+"[upstream]\nattempt_timeout_ms = 300\ntotal_timeout_ms = 3000\n", false, options{})
	first := askAsync(t, s.udp, "hold.example.")
	<-held
	if r := ask(t, "udp", s.udp, wiretest.Query("wait.example.", dns.TypeA)); r.Rcode != dns.RcodeSuccess {
		t.Fatalf("the waiting query: %s", dns.RcodeToString[r.Rcode])
	}
	if r := <-first; r == nil || r.Rcode != dns.RcodeServerFailure {
		t.Errorf("the holder: %v, want SERVFAIL after its expiry", r)
	}
	fs := s.scrape(t)
	if v := metricValue(t, fs, "nxdns_upstream_queued_total"); v != 1 {
		t.Errorf("queued total %v, want 1", v)
	}
	if v := metricValue(t, fs, "nxdns_upstream_queued_seconds_total"); v <= 0 {
		t.Errorf("queued seconds %v, want the wait's time", v)
	}
	if v := metricValue(t, fs, "nxdns_upstream_budget_exhausted_total"); v != 0 {
		t.Errorf("budget exhausted %v, want 0", v)
	}
}

// Past server.max_concurrent_queries a query is refused and counted.
func TestMetricsOverloadRefused(t *testing.T) {
	held := make(chan string, 1)
	release, releaseAll := releaser(t)
	a := wiretest.NewServer(t, wiretest.Notify(held, wiretest.Gate(release, wiretest.Answer())))
	s := startObserved(t, "[server]\nmax_concurrent_queries = 1\n"+upstreamTOML(a.Addr), false, options{})
	first := askAsync(t, s.udp, "hold.example.")
	<-held
	if r := ask(t, "udp", s.udp, wiretest.Query("more.example.", dns.TypeA)); r.Rcode != dns.RcodeRefused {
		t.Errorf("past the limit: %s, want REFUSED", dns.RcodeToString[r.Rcode])
	}
	if v := metricValue(t, s.scrape(t), "nxdns_overload_refused_total"); v != 1 {
		t.Errorf("overload refused %v, want 1", v)
	}
	releaseAll()
	<-first
}

// A port already taken or a query log that cannot be opened stops the
// daemon before it serves, with nothing left running (goleak checks).
func TestStartFailuresLeaveNothingRunning(t *testing.T) {
	up := wiretest.NewServer(t, wiretest.Answer())
	s := startObserved(t, upstreamTOML(up.Addr), false, options{})

	cfg, err := config.Parse([]byte(fmt.Sprintf("[server]\nlisten = [\"127.0.0.1:0\"]\n[admin]\nlisten = %q\n%s",
		s.d.AdminAddr().String(), upstreamTOML(up.Addr))))
	if err != nil {
		t.Fatal(err)
	}
	d, err := newDaemon(cfg, nil, options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(); err == nil {
		t.Error("started with the admin port taken")
		_ = d.Shutdown(context.Background())
	}

	// The check refuses a missing directory (config.TestQueryLogPathChecked);
	// one can still vanish between the check and the start.
	cfg, err = config.Parse([]byte(fmt.Sprintf("[query_log]\npath = %q\n%s",
		filepath.Join(t.TempDir(), "query.log"), upstreamTOML(up.Addr))))
	if err != nil {
		t.Fatal(err)
	}
	cfg.QueryLog.Path = filepath.Join(t.TempDir(), "missing", "query.log")
	if _, err := newDaemon(cfg, nil, options{}); err == nil {
		t.Error("built a daemon whose query log cannot be opened")
	}
}
