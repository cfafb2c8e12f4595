package daemon

import (
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// bootHost is the DoT upstream's host name in these tests: the system
// resolver knows nothing of .test (RFC 6761), so an answer through the
// upstream proves the name was found through the bootstrap.
const bootHost = "dot.test"

// addressOf answers A queries for bootHost with 127.0.0.1 and AAAA with
// nothing, and hands every other query to h.
func addressOf(h wiretest.Handler) wiretest.Handler {
	return func(w *wiretest.Writer, q *dns.Msg) {
		qq := q.Question[0]
		if !strings.EqualFold(qq.Name, bootHost+".") {
			h(w, q)
			return
		}
		r := new(dns.Msg).SetReply(q)
		if qq.Qtype == dns.TypeA {
			r.Answer = append(r.Answer, &dns.A{
				Hdr: dns.RR_Header{Name: qq.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300},
				A:   net.IPv4(127, 0, 0, 1),
			})
		}
		w.WriteMsg(r)
	}
}

// dotWithoutIP starts a DoT fake for bootHost and returns it with its
// [[upstreams]] table: no ip, the fake's CA as ca_file.
func dotWithoutIP(t *testing.T) (*wiretest.DoTServer, string) {
	ca := wiretest.NewCA(t)
	srv := wiretest.NewDoTServer(t, ca.Certificate(t, bootHost), wiretest.Answer())
	_, port, _ := net.SplitHostPort(srv.Addr)
	return srv, fmt.Sprintf("[[upstreams]]\nname = \"dot\"\naddress = \"tls://%s\"\nca_file = %q\n",
		net.JoinHostPort(bootHost, port), ca.WriteFile(t))
}

// An upstream without ip is found through upstream.bootstrap: the daemon
// answers through it, and the bootstrap is asked once (A and AAAA) for
// the start-up probe and every query after it.
func TestUpstreamFoundThroughBootstrap(t *testing.T) {
	boot := wiretest.NewServer(t, addressOf(wiretest.Rcode(dns.RcodeRefused)))
	dot, upstream := dotWithoutIP(t)
	s := startDaemon(t, fmt.Sprintf("[upstream]\nbootstrap = [%q]\n", boot.Addr)+upstream)
	for i := range 3 {
		if r := ask(t, "udp", s.udp, wiretest.Query(fmt.Sprintf("q%d.example.", i), dns.TypeA)); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			t.Fatalf("query %d: %s with %d records, want the DoT fake's answer", i, dns.RcodeToString[r.Rcode], len(r.Answer))
		}
	}
	if n := dot.Queries(); n != 3 {
		t.Errorf("the DoT upstream saw %d queries, want 3", n)
	}
	if n := boot.UDPQueries() + boot.TCPQueries(); n != 2 {
		t.Errorf("the bootstrap was asked %d questions, want 2 (A and AAAA, once)", n)
	}
}

// With upstream.bootstrap empty, the host is looked up through the
// upstream that has an address of its own, a lower-priority one here:
// the queries are still answered by the first.
func TestUpstreamFoundThroughAnUpstreamWithIP(t *testing.T) {
	plain := wiretest.NewServer(t, addressOf(wiretest.Rcode(dns.RcodeServerFailure)))
	dot, upstream := dotWithoutIP(t)
	s := startDaemon(t, upstream+fmt.Sprintf("[[upstreams]]\nname = \"plain\"\naddress = \"udp://%s\"\n", plain.Addr))
	if r := ask(t, "udp", s.udp, wiretest.Query("example.com.", dns.TypeA)); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("%s with %d records, want the DoT fake's answer", dns.RcodeToString[r.Rcode], len(r.Answer))
	}
	if n := dot.Queries(); n != 1 {
		t.Errorf("the DoT upstream saw %d queries, want 1", n)
	}
	if n := plain.UDPQueries() + plain.TCPQueries(); n != 2 {
		t.Errorf("the plain upstream was asked %d questions, want 2 (A and AAAA for %s)", n, bootHost)
	}
}

// A reload's upstream.bootstrap takes effect at once for the upstreams it
// keeps: their lookups ask the new list, and a failure the old one caused
// is forgotten.
func TestReloadReplacesBootstrap(t *testing.T) {
	refusing := wiretest.NewServer(t, wiretest.Rcode(dns.RcodeRefused))
	good := wiretest.NewServer(t, addressOf(wiretest.Rcode(dns.RcodeRefused)))
	dot, upstream := dotWithoutIP(t)
	src := func(boot string) string { return fmt.Sprintf("[upstream]\nbootstrap = [%q]\n", boot) + upstream }
	s := startDaemon(t, src(refusing.Addr))
	if r := ask(t, "udp", s.udp, wiretest.Query("example.com.", dns.TypeA)); r.Rcode != dns.RcodeServerFailure {
		t.Fatalf("through a refusing bootstrap: %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}
	asked := refusing.UDPQueries() + refusing.TCPQueries()

	mustReload(t, s.d, src(good.Addr))
	if r := ask(t, "udp", s.udp, wiretest.Query("example.com.", dns.TypeA)); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("after the reload: %s with %d records, want the DoT fake's answer", dns.RcodeToString[r.Rcode], len(r.Answer))
	}
	if n := dot.Queries(); n != 1 {
		t.Errorf("the DoT upstream saw %d queries, want 1", n)
	}
	if n := refusing.UDPQueries() + refusing.TCPQueries(); n != asked {
		t.Errorf("the old bootstrap was asked %d more questions after the reload", n-asked)
	}
	s.d.Pool().Sync()
	if st := s.d.Pool().Status()[0]; st.Failures != 0 {
		t.Errorf("the upstream has %d recorded failures, want 0: a bootstrap's failure is not its own", st.Failures)
	}
}
