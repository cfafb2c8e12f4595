package daemon

import (
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// Issue 7's acceptance for the cap, end to end: with the upstream stalled
// and ten times server.max_concurrent_queries sent at once, the queries
// past the cap are answered REFUSED at once and counted, the number of
// goroutines follows the cap and not the flood, and once the upstream lets
// go the admitted queries are answered and the daemon serves on.
//
// Not parallel: it counts the process's goroutines.
func TestOverloadTenTimesTheCap(t *testing.T) {
	const limit, flood = 8, 10 * 8
	held := make(chan string, flood)
	release, releaseAll := releaser(t)
	up := wiretest.NewServer(t, wiretest.Notify(held, wiretest.Gate(release, wiretest.Answer())))
	// The attempt outlives the test: only the gate ends the admitted queries.
	s := startObserved(t, "[server]\nmax_concurrent_queries = 8\n"+
		"[upstream]\nattempt_timeout_ms = 30000\ntotal_timeout_ms = 30000\n"+
		upstreamTOML(up.Addr), false, options{})
	baseline := runtime.NumGoroutine()

	c, err := net.Dial("udp", s.udp)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for id := range uint16(flood) {
		q := wiretest.Query("flood.example.", dns.TypeA)
		q.Id = id
		b, err := q.Pack()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
	}

	dc := &dns.Conn{Conn: c}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	refused := map[uint16]bool{}
	for len(refused) < flood-limit {
		r, err := dc.ReadMsg()
		if err != nil {
			t.Fatalf("after %d REFUSED: %v", len(refused), err)
		}
		if r.Rcode != dns.RcodeRefused || len(r.Question) != 1 || r.Question[0].Name != "flood.example." || refused[r.Id] {
			t.Fatalf("answer %d while the upstream stalls: %s with question %v (refused before: %v); want one REFUSED with the question",
				r.Id, dns.RcodeToString[r.Rcode], r.Question, refused[r.Id])
		}
		refused[r.Id] = true
	}
	for range limit {
		select {
		case <-held:
		case <-time.After(5 * time.Second):
			t.Fatal("fewer queries than the cap reached the upstream")
		}
	}
	// Per admitted query: the listener's goroutine for it and the fake
	// upstream's; nothing per refused one. The slack absorbs the runtime's
	// own comings and goings.
	const perQuery, slack = 2, 6
	g := runtime.NumGoroutine()
	if g > baseline+perQuery*limit+slack {
		t.Errorf("%d goroutines with %d queries admitted and %d refused, baseline %d", g, limit, flood-limit, baseline)
	}
	t.Logf("goroutines: %d before the flood, %d with %d admitted and %d refused", baseline, g, limit, flood-limit)
	// TCP shares the cap.
	if r := ask(t, "tcp", s.tcp, wiretest.Query("tcp.example.", dns.TypeA)); r.Rcode != dns.RcodeRefused {
		t.Errorf("tcp query at the cap: %s, want REFUSED", dns.RcodeToString[r.Rcode])
	}
	if v := metricValue(t, s.scrape(t), "nxdns_overload_refused_total"); v != flood-limit+1 {
		t.Errorf("nxdns_overload_refused_total = %v, want %d", v, flood-limit+1)
	}

	releaseAll()
	for answered := 0; answered < limit; answered++ {
		r, err := dc.ReadMsg()
		if err != nil {
			t.Fatalf("after %d admitted answers: %v", answered, err)
		}
		if r.Rcode != dns.RcodeSuccess || refused[r.Id] || len(r.Answer) != 1 {
			t.Fatalf("answer %d once released: %s with %d records (refused before: %v); want NOERROR",
				r.Id, dns.RcodeToString[r.Rcode], len(r.Answer), refused[r.Id])
		}
	}
	if r := ask(t, "udp", s.udp, wiretest.Query("after.example.", dns.TypeA)); r.Rcode != dns.RcodeSuccess {
		t.Errorf("after the flood: %s, want NOERROR", dns.RcodeToString[r.Rcode])
	}
}

// A query refused past server.max_concurrent_queries gets its query-log
// line, source refused, as one refused for server.allow does (spec
// section 6).
func TestOverloadRefusalIsLogged(t *testing.T) {
	held := make(chan string, 1)
	release, releaseAll := releaser(t)
	up := wiretest.NewServer(t, wiretest.Notify(held, wiretest.Gate(release, wiretest.Answer())))
	s := startObserved(t, "[server]\nmax_concurrent_queries = 1\n[cache]\nenabled = false\n"+
		"[upstream]\nattempt_timeout_ms = 30000\ntotal_timeout_ms = 30000\n"+upstreamTOML(up.Addr), false, options{})
	done := make(chan *dns.Msg, 1)
	go func() {
		c := &dns.Client{Net: "udp", Timeout: 10 * time.Second}
		r, _, _ := c.Exchange(wiretest.Query("held.example.", dns.TypeA), s.udp)
		done <- r
	}()
	<-held // the one permit is taken
	if r := ask(t, "udp", s.udp, wiretest.Query("Refused.Example.", dns.TypeMX)); r.Rcode != dns.RcodeRefused {
		t.Fatalf("at the cap: %s, want REFUSED", dns.RcodeToString[r.Rcode])
	}
	releaseAll()
	<-done
	var found bool
	for _, l := range s.logLines(t) {
		if l.qname() == "Refused.Example." {
			found = true
			if l.source() != "refused" || l.Rcode != "REFUSED" || deref(l.QType) != "MX" {
				t.Errorf("the refused query's line: source %s rcode %s qtype %s, want refused, REFUSED, MX", l.source(), l.Rcode, deref(l.QType))
			}
		}
	}
	if !found {
		t.Error("the query refused for overload has no query-log line")
	}
}
