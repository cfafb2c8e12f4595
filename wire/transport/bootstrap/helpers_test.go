package bootstrap

import (
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/query/forward"
	"github.com/nxdnsd/nxdnsd/wire/transport"
	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// host is the upstream's name in these tests. The system resolver knows
// nothing of .test (RFC 6761): a connection that reaches the fake proves
// the name was found through the bootstrap.
const host = "dot.test"

// lookupTimeout bounds a bootstrap exchange in these tests: generous, a
// loaded machine running -race must not fail a correct lookup; the tests
// that stall a bootstrap bound it by their exchange's expiry instead.
const lookupTimeout = 5 * time.Second

// records answers A queries for host with 127.0.0.1 and ttl, AAAA with
// nothing (NODATA), and everything else REFUSED — or REFUSED for all
// while refuse is set.
func records(ttl uint32, refuse *atomic.Bool) wiretest.Handler {
	return func(w *wiretest.Writer, q *dns.Msg) {
		r := new(dns.Msg).SetReply(q)
		qq := q.Question[0]
		switch {
		case refuse != nil && refuse.Load(), !strings.EqualFold(qq.Name, host+"."):
			r.Rcode = dns.RcodeRefused
		case qq.Qtype == dns.TypeA:
			r.Answer = append(r.Answer, &dns.A{
				Hdr: dns.RR_Header{Name: qq.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl},
				A:   net.IPv4(127, 0, 0, 1),
			})
		}
		w.WriteMsg(r)
	}
}

// newBootstrap starts a plain-DNS bootstrap fake running h and returns it
// with the source that asks it, as the daemon builds one for an
// upstream.bootstrap entry.
func newBootstrap(tb testing.TB, h wiretest.Handler) (*wiretest.Server, Source) {
	tb.Helper()
	srv := wiretest.NewServer(tb, h)
	f := forward.New(srv.Addr, lookupTimeout)
	tb.Cleanup(func() { _ = f.Close() })
	return srv, Source{Name: srv.Addr, Exchanger: f}
}

// newResolver returns a Resolver asking sources, closed at the test's end
// (after the transports made later, which use it).
func newResolver(tb testing.TB, sources ...Source) *Resolver {
	tb.Helper()
	r := New(nil, sources)
	tb.Cleanup(func() { _ = r.Close() })
	return r
}

// tlsServer is a DoT or DoH fake for host with a throwaway CA.
type tlsServer struct {
	address string // the upstream address, naming host
	ca      *wiretest.CA
	dot     *wiretest.DoTServer // or nil
	doh     *wiretest.DoHServer // or nil
}

// conns is the connections the fake accepted.
func (s tlsServer) conns() int64 {
	if s.dot != nil {
		return s.dot.Accepts()
	}
	return s.doh.Conns()
}

// newUpstream starts a DoT ("tls") or DoH ("https") fake for host running h.
func newUpstream(tb testing.TB, scheme string, h wiretest.Handler) tlsServer {
	tb.Helper()
	s := tlsServer{ca: wiretest.NewCA(tb)}
	cert := s.ca.Certificate(tb, host)
	var addr string
	if scheme == "tls" {
		s.dot = wiretest.NewDoTServer(tb, cert, h)
		addr = s.dot.Addr
	} else {
		s.doh = wiretest.NewDoHServer(tb, cert, h)
		addr = s.doh.Addr
	}
	_, port, _ := net.SplitHostPort(addr)
	s.address = "tls://" + net.JoinHostPort(host, port)
	if scheme == "https" {
		s.address = "https://" + net.JoinHostPort(host, port) + wiretest.DoHPath
	}
	return s
}

// transport returns a transport to s without ip, trusting s's CA, with
// opts (WithResolver), closed at the test's end.
func (s tlsServer) transport(tb testing.TB, opts ...transport.Option) transport.Transport {
	tb.Helper()
	a, err := transport.ParseAddress(s.address)
	if err != nil {
		tb.Fatal(err)
	}
	tr, err := transport.NewTransport(a, append([]transport.Option{transport.WithRootCAs(s.ca.Pool())}, opts...)...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = tr.Close() })
	return tr
}

// exchange sends a query for example.com through x and returns the
// answer's error.
func exchange(tb testing.TB, x transport.Exchanger) error {
	tb.Helper()
	q, err := transport.NewQuery(wiretest.Query("example.com", dns.TypeA))
	if err != nil {
		tb.Fatal(err)
	}
	_, err = x.Exchange(tb.Context(), q, time.Now().Add(lookupTimeout))
	return err
}

// clock is a settable clock for a Resolver's now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// settled waits for the lookup running for host, if any, to end: a
// background refresh, which no caller waits for.
func settled(r *Resolver, host string) {
	r.mu.Lock()
	var wait chan struct{}
	if e := r.hosts[host]; e != nil {
		wait = e.pending
	}
	r.mu.Unlock()
	if wait != nil {
		<-wait
	}
}
