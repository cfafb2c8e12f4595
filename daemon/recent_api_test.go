package daemon

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"testing"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/admin"
	"github.com/nxdnsd/nxdnsd/admin/admintest"
	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// recentQueries reads /api/queries and holds it to openapi.yaml.
func (o *observed) recentQueries(tb testing.TB, query string) (capacity int, queries []json.RawMessage) {
	tb.Helper()
	code, body := o.get(tb, "/api/queries"+query)
	admintest.Require(tb, "/api/queries", code, body)
	var got struct {
		Capacity int               `json:"capacity"`
		Queries  []json.RawMessage `json:"queries"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		tb.Fatal(err)
	}
	return got.Capacity, got.Queries
}

// /api/queries holds what the query log writes with its attempts, object
// for object, newest first: a local answer, a failover with its trail, a
// SERVFAIL after every upstream refused. Mutation check: encoding the ring
// without the trail, or oldest first, fails the comparison.
func TestRecentQueriesAreTheQueryLogNewestFirst(t *testing.T) {
	a := wiretest.NewServer(t, wiretest.Rcode(dns.RcodeRefused))
	b := wiretest.NewServer(t, byLabel(wiretest.Answer(), map[string]wiretest.Handler{"bad": wiretest.Rcode(dns.RcodeRefused)}))
	o := startObserved(t, upstreamTOML(a.Addr, b.Addr)+`
[upstream]
failure_threshold = 100
[[local_records]]
name = "nas.lan."
type = "A"
value = "192.0.2.10"
`, true, options{})
	ask(t, "udp", o.udp, wiretest.Query("nas.lan.", dns.TypeA))
	ask(t, "tcp", o.tcp, wiretest.Query("example.com.", dns.TypeA))
	if r := ask(t, "udp", o.udp, wiretest.Query("bad.example.", dns.TypeAAAA)); r.Rcode != dns.RcodeServerFailure {
		t.Fatalf("bad.example.: %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}

	o.d.qlog.Sync()
	data, err := os.ReadFile(o.logPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
	capacity, queries := o.recentQueries(t, "")
	if capacity != 1000 || len(queries) != 3 || len(lines) != 3 {
		t.Fatalf("capacity %d with %d queries, %d log lines; want 1000, 3, 3", capacity, len(queries), len(lines))
	}
	for i, q := range queries {
		if line := lines[len(lines)-1-i]; !bytes.Equal(q, line) {
			t.Errorf("query %d:\n%s\nthe log wrote\n%s", i, q, line)
		}
	}
	var failover logLine
	if err := json.Unmarshal(queries[1], &failover); err != nil {
		t.Fatal(err)
	}
	if failover.qname() != "example.com." || len(failover.Attempts) != 2 ||
		failover.Attempts[0].Outcome != "peer_fault" || failover.Attempts[1].Outcome != "answer" {
		t.Errorf("the failover: %+v", failover)
	}
	if _, q := o.recentQueries(t, "?limit=1"); len(q) != 1 || !bytes.Equal(q[0], queries[0]) {
		t.Errorf("limit=1: %s", q)
	}
}

// The ring is kept without a query log, holds admin.recent_queries, and
// /api/stats counts what was answered.
func TestRecentQueriesWithoutAQueryLog(t *testing.T) {
	up := wiretest.NewServer(t, wiretest.Answer(wiretest.A("example.com.", 0)))
	s := runDaemon(t, "[server]\nlisten = [\"127.0.0.1:0\"]\n[admin]\nlisten = \"127.0.0.1:0\"\nrecent_queries = 2\n"+upstreamTOML(up.Addr), options{})
	o := &observed{started: s, admin: "http://" + s.d.AdminAddr().String()}
	for i := range 3 {
		ask(t, "udp", s.udp, wiretest.Query(fmt.Sprintf("q%d.example.com.", i), dns.TypeA))
	}
	capacity, queries := o.recentQueries(t, "?limit=10")
	var names []string
	for _, q := range queries {
		var l logLine
		if err := json.Unmarshal(q, &l); err != nil {
			t.Fatal(err)
		}
		names = append(names, l.qname())
	}
	if capacity != 2 || fmt.Sprint(names) != "[q2.example.com. q1.example.com.]" {
		t.Errorf("capacity %d, kept %v; want 2: q2, q1", capacity, names)
	}

	code, body := o.get(t, "/api/stats")
	admintest.Require(t, "/api/stats", code, body)
	var st admin.Stats
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatal(err)
	}
	if code != http.StatusOK || st.Queries.Total != 3 || st.Queries.NoError != 3 || st.Cache.Enabled {
		t.Errorf("stats %d %+v, want 3 queries answered NOERROR, the cache off", code, st)
	}
}

// admin.recent_queries = 0 keeps nothing, and says so.
func TestRecentQueriesOff(t *testing.T) {
	up := wiretest.NewServer(t, wiretest.Answer())
	s := runDaemon(t, "[server]\nlisten = [\"127.0.0.1:0\"]\n[admin]\nlisten = \"127.0.0.1:0\"\nrecent_queries = 0\n"+upstreamTOML(up.Addr), options{})
	o := &observed{started: s, admin: "http://" + s.d.AdminAddr().String()}
	ask(t, "udp", s.udp, wiretest.Query("example.com.", dns.TypeA))
	if capacity, queries := o.recentQueries(t, ""); capacity != 0 || len(queries) != 0 {
		t.Errorf("capacity %d with %d queries, want none kept", capacity, len(queries))
	}
}
