package daemon

import (
	"syscall"
	"testing"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// failedWriter is a query-log writer on a disk that is full: every write
// fails, nothing written.
type failedWriter struct{}

func (failedWriter) Write([]byte) (int, error) { return 0, syscall.ENOSPC }

// Lines lost to failed writes count in nxdns_query_log_dropped_total, one
// each (issue 16: about 2,930 lines lost on a full disk while the counter
// stayed 0). Before the fix the counter stayed 0 here.
func TestQueryLogLostLinesCounted(t *testing.T) {
	const queries = 20
	s := startObserved(t, upstreamTOML("192.0.2.1:53")+"[[local_records]]\nname = \"nas.home.\"\ntype = \"A\"\nvalue = \"192.168.1.10\"\n", false,
		options{queryLog: failedWriter{}})
	for range queries {
		if r := ask(t, "udp", s.udp, wiretest.Query("nas.home.", dns.TypeA)); r.Rcode != dns.RcodeSuccess {
			t.Fatalf("answer with the disk full: %v", r)
		}
	}
	s.d.qlog.Sync() // every accepted line written, or lost
	if got := metricValue(t, s.scrape(t), "nxdns_query_log_dropped_total"); got != queries {
		t.Errorf("nxdns_query_log_dropped_total %v, want %d: every line lost", got, queries)
	}
}
