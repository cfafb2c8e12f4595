package daemon

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// Metrics and the query log never contradict each other. The fakes never
// answer SERVFAIL themselves, so a pool line naming X with another rcode
// is an answer of X's, which X's success counter must show; and every
// pool line naming X is one of X's recorded outcomes.
func TestMetricsAndQueryLogAgree(t *testing.T) {
	handlers := map[string]wiretest.Handler{
		"refused": wiretest.Rcode(dns.RcodeRefused),
		"nx":      wiretest.Rcode(dns.RcodeNameError),
		"stall":   wiretest.Stall,
		"garbage": wiretest.Garbage,
	}
	a := wiretest.NewServer(t, byLabel(wiretest.Answer(), handlers))
	b := wiretest.NewServer(t, byLabel(wiretest.Answer(), map[string]wiretest.Handler{"stall": wiretest.Stall, "nx": handlers["nx"]}))
	lan := wiretest.NewServer(t, wiretest.Answer())
	s := startObserved(t, upstreamTOML(a.Addr, b.Addr)+fmt.Sprintf(`
[upstream]
attempt_timeout_ms = 100
total_timeout_ms = 150
failure_threshold = 100
[[forward_zones]]
zone = "lan."
resolver = %q
`, lan.Addr), true, options{})

	names := []string{"ok", "nx", "refused", "garbage", "stall", "ok", "refused", "nx"}
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Go(func() {
			ask(t, "udp", s.udp, wiretest.Query(fmt.Sprintf("%s.q%d.example.", n, i), dns.TypeA))
		})
	}
	wg.Go(func() { ask(t, "tcp", s.tcp, wiretest.Query("nas.lan.", dns.TypeA)) })
	wg.Go(func() { ask(t, "udp", s.udp, wiretest.Query("localhost.", dns.TypeA)) })
	wg.Wait()

	fs := s.scrape(t)
	lines := s.logLines(t)
	if len(lines) != len(names)+2 {
		t.Fatalf("%d lines for %d queries", len(lines), len(names)+2)
	}
	var queries float64
	for _, f := range fs["nxdns_queries_total"].Samples {
		queries += f.Value
	}
	if queries != float64(len(lines)) {
		t.Errorf("nxdns_queries_total sums to %v, the log has %d lines", queries, len(lines))
	}
	for _, u := range []string{"up0", "up1"} {
		answered, named := 0, 0
		for _, l := range lines {
			if l.source() != "pool" || l.upstream() != u {
				continue
			}
			named++
			if l.Rcode != "SERVFAIL" {
				answered++
			}
		}
		success := metricValue(t, fs, "nxdns_upstream_success_total", "upstream", u)
		failure := metricValue(t, fs, "nxdns_upstream_failure_total", "upstream", u)
		if float64(answered) != success {
			t.Errorf("%s: %d answered lines, success counter %v", u, answered, success)
		}
		if float64(named) > success+failure {
			t.Errorf("%s: named by %d lines, but only %v+%v outcomes recorded", u, named, success, failure)
		}
	}
	checkAttemptsAgree(t, lines, fs, []string{"up0", "up1"})
}

// stalledWriter is a query-log destination that hangs: every Write waits
// for unstall, and entered is closed when the first one starts.
type stalledWriter struct {
	entered     chan struct{}
	enterOnce   sync.Once
	release     chan struct{}
	releaseOnce sync.Once

	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func newStalledWriter() *stalledWriter {
	return &stalledWriter{entered: make(chan struct{}), release: make(chan struct{})}
}

func (w *stalledWriter) Write(p []byte) (int, error) {
	w.enterOnce.Do(func() { close(w.entered) })
	<-w.release
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *stalledWriter) unstall() { w.releaseOnce.Do(func() { close(w.release) }) }

func (w *stalledWriter) bytes() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return bytes.Clone(w.buf.Bytes())
}
