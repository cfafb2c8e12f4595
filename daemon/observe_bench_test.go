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
	"github.com/nxdnsd/nxdnsd/metrics"
	"github.com/nxdnsd/nxdnsd/metrics/metricstest"
	"github.com/nxdnsd/nxdnsd/query"
	"github.com/nxdnsd/nxdnsd/querylog"
)

// BenchmarkHooks is what observing one answered pool query costs the
// query: the metrics and the query-log line, with and without the attempt
// trail (an expiry on one upstream, then an answer from the next). The
// writer goroutine writes to io.Discard; every 1024 queries the loop lets
// it catch up, so the figure is the cost of lines written, not of the
// cheaper drops.
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
	for _, attempts := range []bool{false, true} {
		name := "plain"
		if attempts {
			name = "attempts"
		}
		b.Run(name, func(b *testing.B) {
			m := metrics.New(metrics.Config{Upstreams: names})
			ql := querylog.New(io.Discard, querylog.Options{Encoder: querylog.Encoder{Attempts: attempts}})
			o := &observer{metrics: m, qlog: ql}
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
