package transport

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// newDoH is newDoT for DoH: a DoH fake running h and a transport made by
// the factory, dialling 127.0.0.1 for dns.test and trusting the CA.
func newDoH(tb testing.TB, h wiretest.Handler, opts ...Option) (*wiretest.DoHServer, *HTTPS) {
	tb.Helper()
	ca := wiretest.NewCA(tb)
	srv := wiretest.NewDoHServer(tb, ca.Certificate(tb, wiretest.TLSName, "127.0.0.1"), h)
	opts = append([]Option{WithDialIP(loopback), WithRootCAs(ca.Pool())}, opts...)
	return srv, newTestTransport(tb, srv.Upstream(), opts...).(*HTTPS)
}

// newHTTPS starts an HTTPS fake running hh, and a transport to it.
func newHTTPS(tb testing.TB, hh http.Handler) *HTTPS {
	tb.Helper()
	ca := wiretest.NewCA(tb)
	srv := wiretest.NewHTTPSServer(tb, ca.Certificate(tb, wiretest.TLSName), hh)
	return newTestTransport(tb, srv.Upstream(), WithDialIP(loopback), WithRootCAs(ca.Pool())).(*HTTPS)
}

// The query goes out with ID 0 (RFC 8484 4.1) and the answer comes back
// with the query's; the query is not modified.
func TestHTTPSAnswerKeepsTheQueryID(t *testing.T) {
	t.Parallel()
	wireIDs := make(chan uint16, 1)
	_, tr := newDoH(t, func(w *wiretest.Writer, q *dns.Msg) {
		wireIDs <- q.Id
		wiretest.Answer()(w, q)
	})

	checkAnswerLeavesQuery(t, tr)
	if id := <-wireIDs; id != 0 {
		t.Errorf("the server saw ID %d, want 0", id)
	}
}

func TestHTTPSReusesOneHTTP2Connection(t *testing.T) {
	t.Parallel()
	srv, tr := newDoH(t, wiretest.Answer())

	for i := range 200 {
		mustAnswer(t, tr, query(fmt.Sprintf("q%d.example", i)))
	}
	if got := srv.Conns(); got != 1 {
		t.Errorf("200 sequential exchanges took %d connections, want 1", got)
	}
	if got := srv.HTTP2Requests(); got != 200 {
		t.Errorf("%d of 200 requests over HTTP/2", got)
	}
}

// Concurrent queries share the HTTP/2 connection, each answered with its
// own answer.
func TestHTTPSMultiplexesConcurrentQueries(t *testing.T) {
	t.Parallel()
	const queries = 100
	srv, tr := newDoH(t, wiretest.Answer())
	mustAnswer(t, tr, query("first.example")) // the connection is up: HTTP/2 is known

	errs := make(chan error, queries)
	for i := range queries {
		go func() {
			q := query(fmt.Sprintf("q%d.example", i))
			r, err := exchangeMsg(ctxWithin(t, answerTimeout), tr, q)
			if err == nil && (r.Id != q.Id || !sameQuestion(r.Question, q.Question)) {
				err = fmt.Errorf("query %d %s got the answer to %d %s", q.Id, q.Question[0].Name, r.Id, questionString(r.Question))
			}
			errs <- err
		}()
	}
	for range queries {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if got := srv.Conns(); got != 1 {
		t.Errorf("%d concurrent exchanges took %d connections, want 1", queries, got)
	}
}

// Cancelling one request resets its stream only: the other requests on the
// connection are answered, and the connection stays.
func TestHTTPSCancelLeavesOtherQueriesAnswered(t *testing.T) {
	t.Parallel()
	received := make(chan string, 3)
	release := make(chan struct{})
	srv, tr := newDoH(t, func(w *wiretest.Writer, q *dns.Msg) {
		if q.Question[0].Name == "first.example." {
			wiretest.Answer()(w, q)
			return
		}
		wiretest.Notify(received, wiretest.Gate(release, wiretest.Answer()))(w, q)
	})
	mustAnswer(t, tr, query("first.example")) // the connection is up: HTTP/2 is known

	cancelOneOfThree(t, tr, received, release)
	mustAnswer(t, tr, query("after.example"))
	if got := srv.Conns(); got != 1 {
		t.Errorf("took %d connections, want 1", got)
	}
}

func TestHTTPSStalledServerExpires(t *testing.T) {
	t.Parallel()
	_, tr := newDoH(t, wiretest.Stall)

	_, err := exchangeMsg(ctxWithin(t, expiryTimeout), tr, query("stalled.example"))
	if !isExpiry(err) {
		t.Fatalf("Exchange with a stalled server = %v, want an expiry", err)
	}
}

// HTTP-level misbehaviour is the upstream's fault, each with an error to
// tell it by.
func TestHTTPSRefusesBadResponses(t *testing.T) {
	t.Parallel()
	answer := func(body []byte, contentType string) http.HandlerFunc {
		return func(rw http.ResponseWriter, _ *http.Request) {
			rw.Header().Set("Content-Type", contentType)
			_, _ = rw.Write(body)
		}
	}
	header := make([]byte, 12) // ID 0, a response with nothing in it
	header[2] = 0x80
	cases := []struct {
		name string
		hh   http.Handler
		want error
	}{
		{"server error", http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
			http.Error(rw, "down", http.StatusBadGateway)
		}), ErrHTTPStatus},
		{"not found", http.NotFoundHandler(), ErrHTTPStatus},
		{"a web page", answer([]byte("<html>log in</html>"), "text/html"), ErrContentType},
		{"no content type", answer(header, ""), ErrContentType},
		{"garbage body", answer([]byte{0, 0, 0x80}, dohMediaType), ErrMalformed},
		{"empty body", answer(nil, dohMediaType), ErrMalformed},
		{"oversize body", answer(make([]byte, maxMsgLen+1), dohMediaType), ErrMalformed},
		{"wrong question", answer(header, dohMediaType+"; charset=binary"), ErrQuestionMismatch},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tr := newHTTPS(t, c.hh)
			_, err := exchangeMsg(ctxWithin(t, answerTimeout), tr, query("example.com"))
			if !errors.Is(err, c.want) {
				t.Fatalf("Exchange = %v, want %v", err, c.want)
			}
		})
	}
}

// The transport's errors name the upstream with its path redacted: a DoH
// path is often an account's secret, and errors reach the log, the query
// log's attempt trail and /api/health (issue 16). Before the fix they
// showed the whole URL.
func TestHTTPSErrorsRedactThePath(t *testing.T) {
	t.Parallel()
	const secret = "abc123secret"
	ca := wiretest.NewCA(t)
	srv := wiretest.NewHTTPSServer(t, ca.Certificate(t, wiretest.TLSName), http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		http.Error(rw, "down", http.StatusBadGateway)
	}))
	addr := strings.Replace(srv.Upstream(), wiretest.DoHPath, "/"+secret, 1)
	tr := newTestTransport(t, addr, WithDialIP(loopback), WithRootCAs(ca.Pool())).(*HTTPS)
	_, err := exchangeMsg(ctxWithin(t, answerTimeout), tr, query("example.com"))
	if !errors.Is(err, ErrHTTPStatus) {
		t.Fatalf("Exchange = %v, want %v", err, ErrHTTPStatus)
	}
	if msg := err.Error(); strings.Contains(msg, secret) || !strings.Contains(msg, "/…") {
		t.Errorf("error %q shows the path, or does not name the upstream", msg)
	}
	// A failed handshake (no CA) names it the same way.
	tr = newTestTransport(t, addr, WithDialIP(loopback)).(*HTTPS)
	_, err = exchangeMsg(ctxWithin(t, answerTimeout), tr, query("example.com"))
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Errorf("handshake error %v shows the path", err)
	}
}

// An oversize body of unknown length (chunked, HTTP/1.1 style) is refused
// as well as one announced.
func TestHTTPSRefusesOversizeStreamedBodies(t *testing.T) {
	t.Parallel()
	tr := newHTTPS(t, http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", dohMediaType)
		chunk := make([]byte, 4096)
		for range 20 {
			_, _ = rw.Write(chunk)
			rw.(http.Flusher).Flush() // no Content-Length
		}
	}))
	_, err := exchangeMsg(ctxWithin(t, answerTimeout), tr, query("example.com"))
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("Exchange = %v, want ErrMalformed for the length", err)
	}
}

// Validation of the answer is the same as every transport's.
func TestHTTPSValidatesAnswers(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		handler wiretest.Handler
		want    error
	}{
		{"refused", wiretest.Rcode(dns.RcodeRefused), ErrRefused},
		{"wrong question", wiretest.WrongQuestion, ErrQuestionMismatch},
		{"wrong ID", wiretest.WrongID, ErrIDMismatch},
		{"garbage", wiretest.Garbage, ErrMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, tr := newDoH(t, c.handler)
			_, err := exchangeMsg(ctxWithin(t, answerTimeout), tr, query("example.com"))
			if !errors.Is(err, c.want) {
				t.Fatalf("Exchange = %v, want %v", err, c.want)
			}
		})
	}
}

// A reset stream (the handler closes without answering) fails the query,
// not the connection.
func TestHTTPSResetStreamFailsOnlyItsQuery(t *testing.T) {
	t.Parallel()
	srv, tr := newDoH(t, func(w *wiretest.Writer, q *dns.Msg) {
		if q.Question[0].Name == "reset.example." {
			w.CloseConn()
			return
		}
		wiretest.Answer()(w, q)
	})

	mustAnswer(t, tr, query("first.example"))
	if _, err := exchangeMsg(ctxWithin(t, answerTimeout), tr, query("reset.example")); err == nil || isContextError(err) {
		t.Fatalf("Exchange of a reset stream = %v, want the upstream's error", err)
	}
	mustAnswer(t, tr, query("after.example"))
	if got := srv.Conns(); got != 1 {
		t.Errorf("took %d connections, want 1", got)
	}
}

func TestHTTPSVerifiesTheServer(t *testing.T) {
	t.Parallel()
	ca := wiretest.NewCA(t)
	cases := []struct {
		name  string
		cert  tls.Certificate
		roots *x509.CertPool
		want  any
	}{
		{"another host's certificate", ca.Certificate(t, "other.test"), ca.Pool(), new(x509.HostnameError)},
		{"an unknown CA", ca.Certificate(t, wiretest.TLSName), wiretest.NewCA(t).Pool(), new(x509.UnknownAuthorityError)},
	}
	for _, c := range cases {
		srv := wiretest.NewDoHServer(t, c.cert, wiretest.Answer())
		tr := newTestTransport(t, srv.Upstream(), WithDialIP(loopback), WithRootCAs(c.roots))
		_, err := exchangeMsg(ctxWithin(t, answerTimeout), tr, query("example.com"))
		var verr *tls.CertificateVerificationError
		if !errors.As(err, &verr) || !errors.As(err, c.want) {
			t.Errorf("%s: Exchange = %v, want a certificate verification error of type %T", c.name, err, c.want)
		}
		if isContextError(err) {
			t.Errorf("%s: %v passes for a context error", c.name, err)
		}
		if got := srv.Requests(); got != 0 {
			t.Errorf("%s: the server saw %d requests, want none", c.name, got)
		}
	}
}

func TestHTTPSStalledHandshakeExpires(t *testing.T) {
	t.Parallel()
	bh := wiretest.NewBlackhole(t)
	_, port, _ := net.SplitHostPort(bh.Addr)
	tr := newTestTransport(t, "https://"+net.JoinHostPort(wiretest.TLSName, port)+"/dns-query", WithDialIP(loopback))

	if _, err := exchangeMsg(ctxWithin(t, expiryTimeout), tr, query("stalled.example")); !isExpiry(err) {
		t.Fatalf("Exchange with a stalled handshake = %v, want an expiry", err)
	}
}
