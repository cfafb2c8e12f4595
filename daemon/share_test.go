package daemon

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// Issue 25, item 2, end to end over real sockets: client A's slow names
// hold both slots of the one upstream; client B's query waits for one;
// A's next queries, over A's share now that B is here, are answered
// REFUSED at once and counted, not queued; and the first slot A frees
// goes to B. Before client shares A's next queries queued with B's and
// the test timed out reading their answers.
func TestSlowClientLeavesTheNextSlotToAnother(t *testing.T) {
	held := make(chan string, 4)
	release := make(chan struct{}, 1) // a token lets one held query answer
	up := wiretest.NewServer(t, func(w *wiretest.Writer, q *dns.Msg) {
		if !strings.HasSuffix(q.Question[0].Name, ".slow.test.") {
			wiretest.Answer()(w, q)
			return
		}
		wiretest.Notify(held, func(w *wiretest.Writer, q *dns.Msg) {
			select {
			case <-release:
				wiretest.Answer()(w, q)
			case <-w.Done():
			}
		})(w, q)
	})
	defer close(release) // every held query answers before the daemon shuts down
	// Nothing expires while the test runs: only the tokens end A's exchanges.
	s := startObserved(t, fmt.Sprintf("[cache]\nenabled = false\n[upstream]\nattempt_timeout_ms = 30000\ntotal_timeout_ms = 30000\n"+
		"[[upstreams]]\nname = \"up\"\naddress = \"udp://%s\"\nslots = 2\n", up.Addr), false, options{})
	if v := metricValue(t, s.scrape(t), "nxdns_upstream_share_refused_total"); v != 0 {
		t.Fatalf("share refused %v at start-up, want the series at 0", v)
	}
	a := dialFromLoopback(t, "127.0.0.2", s.udp)
	defer a.Close()
	b := dialFromLoopback(t, "127.0.0.3", s.udp)
	defer b.Close()
	send := func(c *dns.Conn, id uint16, name string) {
		t.Helper()
		q := wiretest.Query(name, dns.TypeA)
		q.Id = id
		if err := c.WriteMsg(q); err != nil {
			t.Fatal(err)
		}
	}
	read := func(c *dns.Conn, who string) *dns.Msg {
		t.Helper()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		r, err := c.ReadMsg()
		if err != nil {
			t.Fatalf("%s: %v", who, err)
		}
		return r
	}

	send(a, 0, "a0.slow.test.")
	send(a, 1, "a1.slow.test.")
	<-held
	<-held // A holds both slots
	send(b, 100, "b.fast.test.")
	send(a, 2, "a2.slow.test.")
	send(a, 3, "a3.slow.test.")
	for range 2 {
		if r := read(a, "A's queries past its share"); r.Rcode != dns.RcodeRefused || r.Id < 2 {
			t.Fatalf("A's answer %d: %s, want its queries 2 and 3 REFUSED while 0 and 1 are held", r.Id, dns.RcodeToString[r.Rcode])
		}
	}

	release <- struct{}{} // one of A's exchanges ends
	if r := read(b, "B"); r.Id != 100 || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("B: answer %d %s with %d records, want NOERROR", r.Id, dns.RcodeToString[r.Rcode], len(r.Answer))
	}
	if r := read(a, "A's released query"); r.Id > 1 || r.Rcode != dns.RcodeSuccess {
		t.Errorf("A's answer %d: %s, want a held one NOERROR", r.Id, dns.RcodeToString[r.Rcode])
	}
	fs := s.scrape(t)
	if v := metricValue(t, fs, "nxdns_upstream_share_refused_total"); v != 2 {
		t.Errorf("share refused %v, want 2", v)
	}
	if v := metricValue(t, fs, "nxdns_upstream_budget_exhausted_total"); v != 0 {
		t.Errorf("budget exhausted %v, want 0", v)
	}
	if v := metricValue(t, fs, "nxdns_upstream_failure_total", "upstream", "up"); v != 0 {
		t.Errorf("upstream failures %v, want 0: a share refusal blames no upstream", v)
	}
}
