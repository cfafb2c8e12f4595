package daemon

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// cacheTOML turns the answer cache on with the shipped defaults, but for
// the keys given (TOML lines).
func cacheTOML(lines string) string { return "[cache]\nenabled = true\n" + lines + "\n" }

// edeCodes returns the Extended DNS Error codes of m.
func edeCodes(m *dns.Msg) []uint16 {
	var out []uint16
	if opt := m.IsEdns0(); opt != nil {
		for _, o := range opt.Option {
			if e, ok := o.(*dns.EDNS0_EDE); ok {
				out = append(out, e.InfoCode)
			}
		}
	}
	return out
}

func ednsQuery(name string, qtype uint16) *dns.Msg {
	q := wiretest.Query(name, qtype)
	q.SetEdns0(1232, false)
	return q
}

// A cached answer is served over UDP and TCP without asking the upstream
// again, with the client's ID and spelling of the question.
func TestCacheHitNeverReachesTheUpstream(t *testing.T) {
	a := wiretest.A("example.com.", 0)
	a.Hdr.Ttl = 300
	up := wiretest.NewServer(t, wiretest.Answer(a))
	s := startDaemon(t, upstreamTOML(up.Addr)+cacheTOML(""))
	for i, name := range []string{"example.com.", "EXAMPLE.com.", "example.COM."} {
		for _, proto := range []string{"udp", "tcp"} {
			q := wiretest.Query(name, dns.TypeA)
			r := ask(t, proto, s.addr(proto), q)
			if r.Id != q.Id || r.Question[0].Name != name || len(r.Answer) != 1 || r.Answer[0].Header().Ttl > 300 {
				t.Fatalf("query %d over %s: %v", i, proto, r)
			}
		}
	}
	if n := up.UDPQueries() + up.TCPQueries(); n != 1 {
		t.Errorf("the upstream saw %d queries, want 1", n)
	}
}

// A failure is remembered (RFC 9520): the second query is answered
// SERVFAIL with EDE 13 and never reaches the upstream.
func TestCacheRemembersFailureOverTheWire(t *testing.T) {
	up := wiretest.NewServer(t, wiretest.Rcode(dns.RcodeRefused)) // a peer fault
	s := startDaemon(t, upstreamTOML(up.Addr)+cacheTOML(""))
	r := ask(t, "udp", s.udp, ednsQuery("down.example.", dns.TypeA))
	if got := edeCodes(r); r.Rcode != dns.RcodeServerFailure || len(got) != 1 || got[0] != 22 {
		t.Fatalf("first: %s EDE %v, want SERVFAIL with EDE 22", dns.RcodeToString[r.Rcode], got)
	}
	r = ask(t, "udp", s.udp, ednsQuery("down.example.", dns.TypeA))
	if got := edeCodes(r); r.Rcode != dns.RcodeServerFailure || len(got) != 1 || got[0] != 13 {
		t.Fatalf("second: %s EDE %v, want SERVFAIL with EDE 13", dns.RcodeToString[r.Rcode], got)
	}
	if n := up.UDPQueries(); n != 1 {
		t.Errorf("the upstream saw %d queries, want 1", n)
	}
}

// An expired answer whose upstream has gone silent is served stale: TTL
// stale_answer_ttl_s and EDE 3, once stale_client_timeout_ms has passed.
// The test waits (about a second) for a one-second TTL to run out: time
// must pass, nothing is synchronised by it.
func TestCacheStaleWhenTheUpstreamIsBlackholed(t *testing.T) {
	var silent atomic.Bool
	a := wiretest.A("example.com.", 0)
	a.Hdr.Ttl = 1
	answer := wiretest.Answer(a)
	up := wiretest.NewServer(t, func(w *wiretest.Writer, q *dns.Msg) {
		if silent.Load() {
			wiretest.Stall(w, q)
			return
		}
		answer(w, q)
	})
	s := startDaemon(t, upstreamTOML(up.Addr)+cacheTOML("stale_client_timeout_ms = 100"))
	ask(t, "udp", s.udp, ednsQuery("example.com.", dns.TypeA))
	silent.Store(true)
	time.Sleep(1100 * time.Millisecond) // the TTL runs out
	r := ask(t, "udp", s.udp, ednsQuery("example.com.", dns.TypeA))
	if got := edeCodes(r); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].Header().Ttl != 30 || len(got) != 1 || got[0] != 3 {
		t.Fatalf("stale: %v, EDE %v; want the A record with TTL 30 and EDE 3", r, got)
	}
}

// With cache.path set, the cache is saved at shutdown and a restart
// answers from it, the upstream gone; a damaged file is logged and
// ignored.
func TestCacheWarmRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache")
	a := wiretest.A("example.com.", 0)
	a.Hdr.Ttl = 300
	up := wiretest.NewServer(t, wiretest.Answer(a))
	conf := cacheTOML("path = " + `"` + path + `"`)

	first := startDaemon(t, upstreamTOML(up.Addr)+conf)
	ask(t, "udp", first.udp, wiretest.Query("example.com.", dns.TypeA))
	shutdown(t, first)
	up.Close()

	dead := wiretest.Refusing(t)
	second := startDaemon(t, upstreamTOML(dead)+conf)
	r := ask(t, "udp", second.udp, wiretest.Query("example.com.", dns.TypeA))
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("after the restart: %v, want the saved answer", r)
	}
	shutdown(t, second)

	if err := os.WriteFile(path, []byte("not a cache file"), 0o600); err != nil {
		t.Fatal(err)
	}
	third := startDaemon(t, upstreamTOML(dead)+conf)
	r = ask(t, "udp", third.udp, wiretest.Query("example.com.", dns.TypeA))
	if r.Rcode != dns.RcodeServerFailure {
		t.Errorf("with a damaged file: %s, want SERVFAIL from the dead upstream (nothing loaded)", dns.RcodeToString[r.Rcode])
	}
}

// shutdown stops s now (its cleanup's Shutdown then does nothing more).
func shutdown(tb testing.TB, s *started) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.d.Shutdown(ctx); err != nil {
		tb.Fatal(err)
	}
}

// A client outside server.allow is answered REFUSED with EDE 18 over UDP
// and TCP, and its query reaches no upstream.
func TestClientsOutsideAllowAreRefused(t *testing.T) {
	up := wiretest.NewServer(t, wiretest.Answer())
	s := startDaemon(t, upstreamTOML(up.Addr)+"[server]\nlisten = [\"127.0.0.1:0\"]\nallow = [\"10.0.0.0/8\"]\n")
	for _, proto := range []string{"udp", "tcp"} {
		r := ask(t, proto, s.addr(proto), ednsQuery("example.com.", dns.TypeA))
		if got := edeCodes(r); r.Rcode != dns.RcodeRefused || len(got) != 1 || got[0] != 18 {
			t.Errorf("%s from 127.0.0.1, outside 10.0.0.0/8: %s EDE %v; want REFUSED with EDE 18", proto, dns.RcodeToString[r.Rcode], got)
		}
	}
	if n := up.UDPQueries() + up.TCPQueries(); n != 0 {
		t.Errorf("the upstream saw %d queries of an outsider", n)
	}
	if v := metricValue(t, scrapeDaemon(t, s.d), "nxdns_acl_refused_total"); v != 2 {
		t.Errorf("nxdns_acl_refused_total = %v, want 2", v)
	}
	inside := startDaemon(t, upstreamTOML(up.Addr)+"[server]\nlisten = [\"127.0.0.1:0\"]\nallow = [\"127.0.0.0/8\"]\n")
	if r := ask(t, "udp", inside.udp, ednsQuery("example.com.", dns.TypeA)); r.Rcode != dns.RcodeSuccess {
		t.Errorf("from inside: %s", dns.RcodeToString[r.Rcode])
	}
}
