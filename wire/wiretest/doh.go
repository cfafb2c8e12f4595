package wiretest

import (
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"log"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// DoHPath is the request path the DoH fake serves, the one RFC 8484's
// examples and most public servers use.
const DoHPath = "/dns-query"

// dnsMessage is DoH's media type (RFC 8484 6).
const dnsMessage = "application/dns-message"

// DoHServer is a fake HTTPS server on 127.0.0.1 offering HTTP/2 (and
// HTTP/1.1), built on httptest.Server. NewDoHServer makes it a DNS-over-HTTPS
// server (RFC 8484) driven by a Handler like Server; NewHTTPSServer runs any
// http.Handler, for servers that misbehave at the HTTP level. The test's
// cleanup stops it and waits for every request.
//
// DoH handlers see Proto() "tcp": the answer goes out whole, and
// Writer.CloseConn resets the request (its HTTP/2 stream) without an answer.
type DoHServer struct {
	// Addr is the server's "127.0.0.1:PORT".
	Addr string

	handler Handler // or nil: NewHTTPSServer's
	core    *Server // the Writers' server: its done channel and problems
	https   *httptest.Server

	conns    atomic.Int64
	requests atomic.Int64
	http2    atomic.Int64
}

// NewDoHServer starts a DoH server presenting cert and running h for the
// queries posted (or sent with GET) to DoHPath, and registers its Close with
// tb.Cleanup. A request that is not a proper DoH request is refused with a
// 4xx status and reported with tb.Error at cleanup, as are answers that do
// not pack.
func NewDoHServer(tb testing.TB, cert tls.Certificate, h Handler) *DoHServer {
	tb.Helper()
	s := &DoHServer{handler: h}
	s.start(tb, cert, http.HandlerFunc(s.serveDoH))
	return s
}

// NewHTTPSServer starts an HTTPS server presenting cert and running hh for
// every request, and registers its Close with tb.Cleanup. It counts
// connections and requests like a DoH server.
func NewHTTPSServer(tb testing.TB, cert tls.Certificate, hh http.Handler) *DoHServer {
	tb.Helper()
	s := &DoHServer{}
	s.start(tb, cert, hh)
	return s
}

func (s *DoHServer) start(tb testing.TB, cert tls.Certificate, hh http.Handler) {
	tb.Helper()
	s.core = &Server{done: make(chan struct{})}
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		if r.ProtoMajor == 2 {
			s.http2.Add(1)
		}
		hh.ServeHTTP(rw, r)
	}))
	hs.EnableHTTP2 = true
	hs.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	hs.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	// Handshakes a client refuses (the point of some tests) and the
	// aborted requests of CloseConn are not news.
	hs.Config.ErrorLog = log.New(io.Discard, "", 0)
	hs.StartTLS()
	s.https, s.Addr = hs, hs.Listener.Addr().String()
	tb.Cleanup(func() {
		s.Close()
		for _, err := range s.core.errors() {
			tb.Errorf("wiretest DoH server %s: %v", s.Addr, err)
		}
	})
}

// Upstream returns the server's upstream address,
// "https://dns.test:PORT/dns-query": it names TLSName, so a transport must
// pin the dial to 127.0.0.1.
func (s *DoHServer) Upstream() string {
	_, port, _ := net.SplitHostPort(s.Addr)
	return "https://" + net.JoinHostPort(TLSName, port) + DoHPath
}

// Conns returns the number of connections accepted, handshakes that failed
// included.
func (s *DoHServer) Conns() int64 { return s.conns.Load() }

// Requests returns the number of HTTP requests received.
func (s *DoHServer) Requests() int64 { return s.requests.Load() }

// HTTP2Requests returns the number of requests received over HTTP/2.
func (s *DoHServer) HTTP2Requests() int64 { return s.http2.Load() }

// Close stops the server: it unblocks every handler through Writer.Done,
// then closes the server and waits for its requests. It is idempotent; the
// test's cleanup calls it.
func (s *DoHServer) Close() {
	if _, first := s.core.shut(); first {
		s.https.Close()
	}
}

// serveDoH serves one RFC 8484 request: a POST of application/dns-message,
// or a GET with the message in the dns parameter (base64url).
func (s *DoHServer) serveDoH(rw http.ResponseWriter, r *http.Request) {
	if r.URL.Path != DoHPath {
		s.refuse(rw, http.StatusNotFound, "a request for %s", r.URL.Path)
		return
	}
	var raw []byte
	var err error
	switch r.Method {
	case http.MethodPost:
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != dnsMessage {
			s.refuse(rw, http.StatusUnsupportedMediaType, "a POST of %q", r.Header.Get("Content-Type"))
			return
		}
		raw, err = io.ReadAll(io.LimitReader(r.Body, 65536))
	case http.MethodGet:
		raw, err = base64.RawURLEncoding.DecodeString(r.URL.Query().Get("dns"))
	default:
		s.refuse(rw, http.StatusMethodNotAllowed, "a %s request", r.Method)
		return
	}
	q := new(dns.Msg)
	if err == nil {
		err = q.Unpack(raw)
	}
	if err != nil || len(q.Question) != 1 {
		s.refuse(rw, http.StatusBadRequest, "a DoH query that does not parse or has %d questions (%v)", len(q.Question), err)
		return
	}

	out := new(captureConn)
	if IsProbe(q) {
		s.core.probes.n.Add(1)
	} else if IsLoopCheck(q) {
		s.core.probes.checks.Add(1)
	}
	s.core.dispatch(s.handler, &Writer{srv: s.core, proto: "tcp", conn: out}, q)
	answer := out.message()
	if answer == nil {
		// CloseConn, or a handler that returned without answering: reset
		// the stream (HTTP/2) or close the connection (HTTP/1.1).
		panic(http.ErrAbortHandler)
	}
	rw.Header().Set("Content-Type", dnsMessage)
	_, _ = rw.Write(answer)
}

// refuse answers a request that is not proper DoH with status, and reports
// it: our transports must never send one.
func (s *DoHServer) refuse(rw http.ResponseWriter, status int, format string, args ...any) {
	s.core.report(fmt.Errorf("refused with %d: "+format, append([]any{status}, args...)...))
	http.Error(rw, http.StatusText(status), status)
}

// captureConn is the connection a DoH Writer writes to: it keeps the first
// framed message, to be sent as the response body.
type captureConn struct {
	buf    []byte
	closed bool
}

// message returns the first whole message written, or nil.
func (c *captureConn) message() []byte {
	if len(c.buf) < 2 {
		return nil
	}
	n := int(binary.BigEndian.Uint16(c.buf))
	if len(c.buf) < 2+n {
		return nil
	}
	return c.buf[2 : 2+n]
}

func (c *captureConn) Write(b []byte) (int, error) {
	if c.closed {
		return 0, net.ErrClosed
	}
	c.buf = append(c.buf, b...)
	return len(b), nil
}

func (c *captureConn) Close() error {
	c.closed = true
	return nil
}

func (c *captureConn) Read([]byte) (int, error)         { return 0, io.EOF } // nothing to read
func (c *captureConn) LocalAddr() net.Addr              { return nil }
func (c *captureConn) RemoteAddr() net.Addr             { return nil }
func (c *captureConn) SetDeadline(time.Time) error      { return nil }
func (c *captureConn) SetReadDeadline(time.Time) error  { return nil }
func (c *captureConn) SetWriteDeadline(time.Time) error { return nil }
