package daemon

import (
	"bytes"
	"errors"
	"io"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/config"
	"github.com/nxdnsd/nxdnsd/metrics"
	"github.com/nxdnsd/nxdnsd/metrics/metricstest"
	"github.com/nxdnsd/nxdnsd/query"
	"github.com/nxdnsd/nxdnsd/querylog"
)

// BenchmarkHooks is what observing one answered pool query costs the
// query: the metrics and the query-log line, with and without the attempt
// trail (an expiry on one upstream, then an answer from the next), and
// each again with the ring of recent queries (admin.recent_queries at its
// default, full from the start: "+recent"), so that the ring's cost reads
// side by side. The writer goroutine writes to io.Discard; every 1024
// queries the loop lets it catch up, so the figure is the cost of lines
// written, not of the cheaper drops.
func BenchmarkHooks(b *testing.B) {
	names := []string{"isp", "quad9"}
	e := &query.Entry{
		Time: time.Now(), Client: netip.MustParseAddrPort("192.168.1.20:53211"), Proto: "udp",
		QName: "example.com.", QType: dns.TypeA, Rcode: dns.RcodeSuccess,
		Source: query.SourcePool, Upstream: "quad9", Duration: 2508 * time.Millisecond,
		Attempts: []actors.Attempt{
			{Upstream: "isp", Outcome: actors.OutcomeExpired, Duration: 2500 * time.Millisecond, Err: errors.New("i/o timeout")},
			{Upstream: "quad9", Outcome: actors.OutcomeAnswer, Duration: 8 * time.Millisecond},
		},
	}
	for _, tc := range []struct {
		name     string
		attempts bool
		recent   int
		noLog    bool
	}{
		// Without a query log no writer goroutine shares the cores with
		// the loop: the steadiest side-by-side figure of the ring's cost.
		{"nolog", false, 0, true},
		{"nolog+recent", false, config.DefaultRecentQueries, true},
		{"plain", false, 0, false},
		{"plain+recent", false, config.DefaultRecentQueries, false},
		{"attempts", true, 0, false},
		{"attempts+recent", true, config.DefaultRecentQueries, false},
	} {
		attempts := tc.attempts
		b.Run(tc.name, func(b *testing.B) {
			m := metrics.New(metrics.Config{Upstreams: names})
			ql := querylog.New(io.Discard, querylog.Options{Encoder: querylog.Encoder{Attempts: attempts}})
			o := &observer{metrics: m, recent: newRecent(tc.recent), qlog: ql}
			if tc.noLog {
				o.qlog = nil
			}
			for range tc.recent {
				o.recent.add(e) // full: every add overwrites
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				// The pool reports attempts itself; counted here so the
				// figure is every observation a query causes.
				for j, a := range e.Attempts {
					m.ObserveAttempt(j, a.Outcome, a.Duration) // upstream j of names
				}
				o.QueryDone(e)
				if i++; i%1024 == 0 {
					ql.Sync()
				}
			}
			b.StopTimer()
			if err := ql.Close(); err != nil {
				b.Fatal(err)
			}
			var out bytes.Buffer
			m.WritePrometheus(&out)
			fs, err := metricstest.Parse(&out)
			if err != nil {
				b.Fatal(err)
			}
			dropped, _ := fs.Value("nxdns_query_log_dropped_total")
			b.ReportMetric(dropped/float64(b.N), "dropped/op")
		})
	}
}

// BenchmarkRecentAdd is the ring's own cost per query, the ring full: from
// one goroutine, and from one per core at once, as the listener's workers
// add (RunParallel's ns/op is wall time: multiply by the cores for the
// cost a query pays).
func BenchmarkRecentAdd(b *testing.B) {
	e := &query.Entry{
		Time: time.Now(), Client: netip.MustParseAddrPort("192.168.1.20:53211"), Proto: "udp",
		QName: "example.com.", QType: dns.TypeA, Source: query.SourcePool, Upstream: "quad9",
		Attempts: []actors.Attempt{
			{Upstream: "isp", Outcome: actors.OutcomeExpired, Duration: 2500 * time.Millisecond},
			{Upstream: "quad9", Outcome: actors.OutcomeAnswer, Duration: 8 * time.Millisecond},
		},
	}
	r := newRecent(config.DefaultRecentQueries)
	for range r.Cap() {
		r.add(e)
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r.add(e)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				r.add(e)
			}
		})
	})
}

// BenchmarkHooksParallel is BenchmarkHooks' "nolog" pair with one
// goroutine per core observing at once, as the listener's workers do: the
// counters and the ring's slots are then shared between cores. A stress
// figure: real queries are microseconds apart, these nanoseconds.
func BenchmarkHooksParallel(b *testing.B) {
	e := &query.Entry{
		Time: time.Now(), Client: netip.MustParseAddrPort("192.168.1.20:53211"), Proto: "udp",
		QName: "example.com.", QType: dns.TypeA, Source: query.SourcePool, Upstream: "quad9",
		Attempts: []actors.Attempt{
			{Upstream: "isp", Outcome: actors.OutcomeExpired, Duration: 2500 * time.Millisecond},
			{Upstream: "quad9", Outcome: actors.OutcomeAnswer, Duration: 8 * time.Millisecond},
		},
	}
	for _, tc := range []struct {
		name   string
		recent int
	}{{"nolog", 0}, {"nolog+recent", config.DefaultRecentQueries}} {
		b.Run(tc.name, func(b *testing.B) {
			m := metrics.New(metrics.Config{Upstreams: []string{"isp", "quad9"}})
			o := &observer{metrics: m, recent: newRecent(tc.recent)}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					for j, a := range e.Attempts {
						m.ObserveAttempt(j, a.Outcome, a.Duration)
					}
					o.QueryDone(e)
				}
			})
		})
	}
}
