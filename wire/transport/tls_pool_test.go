package transport_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/wire/transport"
	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// These tests run the encrypted transports under the real pool and its
// classification: an external test package, as actors imports wire/transport.

// upstreamFake starts a DoT or DoH fake presenting cert and running h, and
// returns its upstream address.
type upstreamFake func(tb testing.TB, cert tls.Certificate, h wiretest.Handler) string

var encrypted = []struct {
	scheme string
	start  upstreamFake
}{
	{"tls", func(tb testing.TB, cert tls.Certificate, h wiretest.Handler) string {
		return wiretest.NewDoTServer(tb, cert, h).Upstream()
	}},
	{"https", func(tb testing.TB, cert tls.Certificate, h wiretest.Handler) string {
		return wiretest.NewDoHServer(tb, cert, h).Upstream()
	}},
}

// transport makes the transport for address the way the daemon does, ip
// and ca_file (its pool, roots) included; closed at the test's end.
func newTLSTransport(tb testing.TB, address string, roots *x509.CertPool) transport.Transport {
	tb.Helper()
	addr, err := transport.ParseAddress(address)
	if err != nil {
		tb.Fatal(err)
	}
	tr, err := transport.NewTransport(addr, transport.WithMaxConns(4),
		transport.WithDialIP(netip.MustParseAddr("127.0.0.1")), transport.WithRootCAs(roots))
	if err != nil {
		tb.Fatalf("NewTransport(%q): %v", address, err)
	}
	tb.Cleanup(func() { _ = tr.Close() })
	return tr
}

// newQuery returns the query for name's A records, packed by transport.NewQuery
// (no answer buffer: answers come back as messages).
func newQuery(tb testing.TB, name string) *transport.Query {
	tb.Helper()
	q, err := transport.NewQuery(wiretest.Query(name, dns.TypeA))
	if err != nil {
		tb.Fatal(err)
	}
	return q
}

// newPool returns a pool over transports, primary first, closed at the
// test's end.
func newPool(tb testing.TB, attempt time.Duration, transports ...transport.Transport) *actors.Pool {
	tb.Helper()
	var specs []actors.Spec
	for i, tr := range transports {
		specs = append(specs, actors.Spec{Name: []string{"primary", "standby"}[i], Slots: 4, Transport: tr})
	}
	pool, err := actors.NewPool(actors.Policy{
		AttemptTimeout: attempt,
		TotalTimeout:   10 * time.Second, // never reached: the test is about the attempt
		Health:         actors.HealthPolicy{FailureThreshold: 3, Backoff: time.Second, BackoffMax: time.Second},
	}, specs, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

// A primary whose certificate names another host is a peer fault: the
// standby answers and the primary's failure counter moves.
func TestPoolFailsOverFromAWrongCertificate(t *testing.T) {
	t.Parallel()
	for _, bad := range encrypted {
		for _, good := range encrypted {
			t.Run(bad.scheme+" to "+good.scheme, func(t *testing.T) {
				t.Parallel()
				ca := wiretest.NewCA(t)
				roots := ca.Pool()
				primary := bad.start(t, ca.Certificate(t, "other.test"), wiretest.Answer())
				standby := good.start(t, ca.Certificate(t, wiretest.TLSName), wiretest.Answer())
				pool := newPool(t, 5*time.Second, newTLSTransport(t, primary, roots), newTLSTransport(t, standby, roots))

				res := pool.Exchange(context.Background(), newQuery(t, "example.com"), time.Now(), nil)
				if res.Err != nil || res.Msg == nil {
					t.Fatalf("Exchange: %v", res.Err)
				}
				if res.Upstream != "standby" {
					t.Errorf("answered by upstream %q, want the standby", res.Upstream)
				}
				if len(res.Attempts) != 2 || res.Attempts[0].Outcome != actors.OutcomePeerFault {
					t.Errorf("attempts %+v, want a peer fault of the primary, then the answer", res.Attempts)
				}
				pool.Sync()
				st := pool.Status()
				if st[0].Failures != 1 || st[0].LastError == nil {
					t.Errorf("primary: %d failures, last error %v; want 1 and the certificate error", st[0].Failures, st[0].LastError)
				}
				if st[1].Successes != 1 {
					t.Errorf("standby: %d successes, want 1", st[1].Successes)
				}
			})
		}
	}
}

// A DoT primary that stalls lets the attempt expire within the attempt
// budget (recorded as expired, the standby answers), and the next query to
// it goes over a new connection.
func TestPoolExpiresAStalledDoTUpstream(t *testing.T) {
	t.Parallel()
	ca := wiretest.NewCA(t)
	roots := ca.Pool()
	cert := ca.Certificate(t, wiretest.TLSName)
	primary := wiretest.NewDoTServer(t, cert, func(w *wiretest.Writer, q *dns.Msg) {
		if q.Question[0].Name == "stalled.example." {
			wiretest.Stall(w, q)
			return
		}
		wiretest.Answer()(w, q)
	})
	standby := wiretest.NewDoTServer(t, cert, wiretest.Answer())
	// 1 s: short for the suite, and long enough for the next query's new
	// connection (a TLS handshake under the race detector) on a machine
	// loaded by the other packages' tests: at 200 ms it expired there
	// under a load average of 19, and the standby answered it.
	pool := newPool(t, time.Second, newTLSTransport(t, primary.Upstream(), roots), newTLSTransport(t, standby.Upstream(), roots))
	// A first query brings the primary's connection up, so the stalled
	// attempt's budget is spent waiting for the answer.
	if res := pool.Exchange(context.Background(), newQuery(t, "first.example"), time.Now(), nil); res.Err != nil || res.Upstream != "primary" {
		t.Fatalf("first query: upstream %q, %v; want the primary's answer", res.Upstream, res.Err)
	}
	res := pool.Exchange(context.Background(), newQuery(t, "stalled.example"), time.Now(), nil)
	if res.Err != nil || res.Upstream != "standby" {
		t.Fatalf("stalled query: upstream %q, %v; want the standby's answer", res.Upstream, res.Err)
	}
	if got := res.Attempts[0].Outcome; got != actors.OutcomeExpired {
		t.Errorf("the stalled attempt ended %v, want expired", got)
	}
	if res := pool.Exchange(context.Background(), newQuery(t, "next.example"), time.Now(), nil); res.Err != nil || res.Upstream != "primary" {
		t.Fatalf("next query: upstream %q, %v; want the primary's answer", res.Upstream, res.Err)
	}
	if got := primary.Accepts(); got != 2 {
		t.Errorf("the primary accepted %d connections, want 2: the stalled one is not reused", got)
	}
}

// Every way the encrypted transports fail is placed by actors.Classify: the
// upstream's failures as peer faults, never as a cancellation or the
// budget; a cancellation as a cancellation.
func TestEncryptedTransportErrorsAreClassified(t *testing.T) {
	t.Parallel()
	ca := wiretest.NewCA(t)
	roots := ca.Pool()
	good := ca.Certificate(t, wiretest.TLSName)
	// Handlers of the cancellation cases tell the test the query arrived,
	// then stall: the test cancels it in flight.
	cases := []struct {
		name   string
		addr   func(t *testing.T, arrived chan<- string) string
		cancel bool // cancel once the query arrived
		want   actors.Group
	}{
		{"dot wrong name", func(t *testing.T, _ chan<- string) string {
			return wiretest.NewDoTServer(t, ca.Certificate(t, "other.test"), wiretest.Answer()).Upstream()
		}, false, actors.GroupPeerFault},
		{"dot closed without an answer", func(t *testing.T, _ chan<- string) string {
			return wiretest.NewDoTServer(t, good, wiretest.CloseConn).Upstream()
		}, false, actors.GroupPeerFault},
		{"dot refused", func(t *testing.T, _ chan<- string) string {
			return wiretest.NewDoTServer(t, good, wiretest.Rcode(dns.RcodeRefused)).Upstream()
		}, false, actors.GroupPeerFault},
		{"dot cancelled", func(t *testing.T, arrived chan<- string) string {
			return wiretest.NewDoTServer(t, good, wiretest.Notify(arrived, wiretest.Stall)).Upstream()
		}, true, actors.GroupCanceled},
		{"doh wrong name", func(t *testing.T, _ chan<- string) string {
			return wiretest.NewDoHServer(t, ca.Certificate(t, "other.test"), wiretest.Answer()).Upstream()
		}, false, actors.GroupPeerFault},
		{"doh status 500", func(t *testing.T, _ chan<- string) string {
			return wiretest.NewHTTPSServer(t, good, http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
				http.Error(rw, "broken", http.StatusInternalServerError)
			})).Upstream()
		}, false, actors.GroupPeerFault},
		{"doh reset stream", func(t *testing.T, _ chan<- string) string {
			return wiretest.NewDoHServer(t, good, wiretest.CloseConn).Upstream()
		}, false, actors.GroupPeerFault},
		{"doh cancelled", func(t *testing.T, arrived chan<- string) string {
			return wiretest.NewDoHServer(t, good, wiretest.Notify(arrived, wiretest.Stall)).Upstream()
		}, true, actors.GroupCanceled},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			arrived := make(chan string, 1)
			tr := newTLSTransport(t, c.addr(t, arrived), roots)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := tr.Exchange(ctx, newQuery(t, "example.com"), time.Time{})
				done <- err
			}()
			if c.cancel {
				<-arrived
				cancel()
			}
			err := <-done
			if err == nil {
				t.Fatal("Exchange succeeded")
			}
			if got := actors.Classify(err); got != c.want {
				t.Errorf("Classify(%v) = %v, want %v", err, got, c.want)
			}
		})
	}
}
