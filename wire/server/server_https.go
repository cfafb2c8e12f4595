package server

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"io"
	"log"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/nxdnsd/nxdnsd/wire/dnsmsg"
)

// DNS over HTTPS (RFC 8484): HTTP/2 (server_https_h2.go) and HTTP/1.1
// (net/http), GET with ?dns= and POST of application/dns-message, at
// DoHPath and DoHPath/NAME. Every phase is bounded by TCPIdleTimeout: the
// TLS handshake, the first request (for HTTP/1.1 also the connection's
// watchdog below), the headers, the body, the answer's writing and the
// wait for the next request. Connections count toward MaxTCPConnections
// like TCP ones.

// DoHPath is the path of DNS over HTTPS (RFC 8484's examples, and every
// client's default); DoHPath/NAME names the client NAME.
const DoHPath = "/dns-query"

// dnsMessage is DoH's media type (RFC 8484 section 6).
const dnsMessage = "application/dns-message"

// maxClientNameLen is the longest client name a DoH path gives: a DNS
// label's length.
const maxClientNameLen = 63

// httpsListener is one HTTPSListen address: its socket and the HTTP
// server on it.
type httpsListener struct {
	tcp *net.TCPListener
	srv *http.Server  // HTTP/1.1; set by startHTTPS
	h1  *connListener // srv's: the connections whose handshake chose HTTP/1.1
}

// startHTTPS starts serving DoH on h: HTTP/2 connections by serveH2,
// HTTP/1.1 ones by net/http.
func (s *Server) startHTTPS(h *httpsListener) {
	conf := s.TLSConfig.Clone()
	conf.MinVersion = max(conf.MinVersion, minTLSVersion)
	conf.NextProtos = []string{"h2", "http/1.1"}
	var protos http.Protocols
	protos.SetHTTP1(true)
	h.h1 = newConnListener(h.tcp.Addr())
	h.srv = &http.Server{
		Handler:           http.HandlerFunc(s.serveHTTPS),
		Protocols:         &protos,
		ReadHeaderTimeout: s.idle,
		ReadTimeout:       s.idle,
		WriteTimeout:      s.idle,
		IdleTimeout:       s.idle,
		MaxHeaderBytes:    maxHeaderBytes,
		ConnState:         s.httpsConnState,
		// net/http logs a client's TLS and protocol mistakes through
		// the standard logger; they are the client's, at debug level.
		ErrorLog: log.New(zapWriter{s.log}, "", 0),
		BaseContext: func(net.Listener) context.Context {
			return s.base
		},
	}
	l := &countingListener{TCPListener: h.tcp, s: s}
	s.wg.Go(func() { s.acceptHTTPS(l, conf, h.h1) })
	s.wg.Go(func() {
		// Serve returns at Shutdown (ErrServerClosed).
		if err := h.srv.Serve(h.h1); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("serving https", zap.Stringer("addr", h.tcp.Addr()), zap.Error(err))
		}
	})
}

// maxHeaderBytes bounds a DoH request's headers: a GET's URL holds a
// query of at most 65,535 bytes in base64 (87,380 characters), and a
// browser's headers are a few KiB.
const maxHeaderBytes = 96 << 10

// shutdownEncrypted is Shutdown's part for the encrypted listeners: the
// DoT sockets are closed (their connections are the TCP ones'), and each
// DoH server shuts down gracefully in the background, closing idle
// connections and waiting for the active ones, until ctx expires (then
// abortHTTPS closes them). The server's WaitGroup holds until every DoH
// query has returned.
func (s *Server) shutdownEncrypted(ctx context.Context) {
	for _, l := range s.tlsListeners {
		l.Close()
	}
	for _, h := range s.https {
		h.tcp.Close()
	}
	// Handshakes and HTTP/2 connections wake up, see closing and end,
	// the latter once their answers are written.
	s.expireTLSConns(false)
	s.dohMu.Lock()
	s.dohStopped = true
	s.dohMu.Unlock()
	for _, h := range s.https {
		s.wg.Go(func() {
			if err := h.srv.Shutdown(ctx); err != nil {
				h.srv.Close()
			}
		})
	}
	if len(s.https) > 0 {
		s.wg.Go(s.dohQueries.Wait)
	}
}

// abortHTTPS closes every DoH connection at once, for a Shutdown whose
// context expired.
func (s *Server) abortHTTPS() {
	for _, h := range s.https {
		if h.srv != nil {
			h.srv.Close()
		}
	}
	s.expireTLSConns(true)
}

// countingListener counts each connection it accepts toward the
// admission's TCP connections, and closes at once those past
// MaxTCPConnections or MaxClientTCPConnections.
type countingListener struct {
	*net.TCPListener
	s *Server
}

// Accept implements net.Listener.
func (l *countingListener) Accept() (net.Conn, error) {
	s := l.s
	for {
		c, err := l.AcceptTCP()
		if err != nil {
			return nil, err
		}
		ap := c.RemoteAddr().(*net.TCPAddr).AddrPort()
		ip := ap.Addr().Unmap()
		if s.closing.Load() || !s.adm.takeConn(ip, s.maxTCP, s.maxClientTCP) {
			c.Close()
			if s.accepted != nil {
				s.accepted(ip, false)
			}
			continue
		}
		if s.accepted != nil {
			s.accepted(ip, true)
		}
		return &countedConn{TCPConn: c, s: s, ip: ip}, nil
	}
}

// countedConn is a DoH connection counted by the admission until it is
// closed, and watched until its first request (httpsConnState).
type countedConn struct {
	*net.TCPConn
	s      *Server
	ip     netip.Addr
	closed atomic.Bool

	// watchdog closes the connection when it has not begun a request
	// within the idle timeout; set and stopped by httpsConnState, on the
	// connection's goroutine.
	watchdog *time.Timer
}

// Close implements net.Conn; the connection is uncounted once.
func (c *countedConn) Close() error {
	err := c.TCPConn.Close()
	if !c.closed.Swap(true) {
		c.s.adm.giveConn(c.ip)
	}
	return err
}

// httpsConnState is the HTTP/1.1 DoH server's http.Server.ConnState. A
// new connection gets a watchdog that closes it unless it begins a
// request within the idle timeout, whatever net/http's own deadlines do
// (its HTTP/2 server, once used here, waited a fixed 10 s for a preface).
func (s *Server) httpsConnState(c net.Conn, state http.ConnState) {
	tc, ok := c.(*tls.Conn)
	if !ok {
		return
	}
	cc, ok := tc.NetConn().(*countedConn)
	if !ok {
		return
	}
	switch state {
	case http.StateNew:
		cc.watchdog = time.AfterFunc(s.idle, func() { cc.Close() })
	case http.StateActive, http.StateClosed, http.StateHijacked:
		if cc.watchdog != nil {
			cc.watchdog.Stop()
		}
	}
}

// serveHTTPS answers one DoH request.
func (s *Server) serveHTTPS(w http.ResponseWriter, r *http.Request) {
	// The path as sent, as HTTP/2's loop reads it: a client name is
	// never percent-encoded (DoHPath%2FNAME, DoHPath/%6Eame are not
	// DoH's).
	name, ok := dohClientName(r.URL.EscapedPath())
	if !ok {
		http.NotFound(w, r)
		return
	}
	client, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		http.Error(w, "unknown client address", http.StatusInternalServerError)
		return
	}
	client = netip.AddrPortFrom(client.Addr().Unmap(), client.Port())

	q := getClientQuery(0, ProtoHTTPS, client)
	defer putClientQuery(q)
	raw, status := readDoHQuery(r, q.buf[:0])
	if status != http.StatusOK {
		if status == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", "GET, POST")
		}
		http.Error(w, http.StatusText(status), status)
		return
	}
	if len(raw) < dnsmsg.HeaderLen {
		http.Error(w, "not a DNS message", http.StatusBadRequest)
		return
	}
	if cap(raw) > cap(q.buf) {
		q.buf = raw // grown; putClientQuery drops it
	}
	q.req.Raw, q.req.ClientName = raw, name
	if q.out == nil {
		q.out = make([]byte, clientAnswerBufLen)
	}
	q.req.Answer = q.out[:0]

	if !s.enterDoH() {
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	answer := s.answerDoH(q)
	s.dohQueries.Done()
	if answer == nil {
		// A response instead of a query, or one the handler dropped.
		http.Error(w, "not a DNS query", http.StatusBadRequest)
		return
	}
	h := w.Header()
	h["Content-Type"] = dnsMessageHeader
	h.Set("Cache-Control", "max-age="+strconv.FormatUint(uint64(CacheMaxAge(answer)), 10))
	h.Set("Content-Length", strconv.Itoa(len(answer)))
	if _, err := w.Write(answer); err != nil {
		s.log.Debug("writing https answer", zap.Stringer("client", client), zap.Error(err))
	}
}

// dnsMessageHeader is the Content-Type header's value of every answer,
// shared: net/http only reads it.
var dnsMessageHeader = []string{dnsMessage}

// enterDoH counts a DoH query in dohQueries unless Shutdown has begun,
// and reports whether it did; the caller calls dohQueries.Done after it.
// The lock orders each Add before Shutdown's Wait.
func (s *Server) enterDoH() bool {
	s.dohMu.Lock()
	defer s.dohMu.Unlock()
	if s.dohStopped {
		return false
	}
	s.dohQueries.Add(1)
	return true
}

// answerDoH admits and answers q's query as the TCP read loop does: past
// a limit it is answered REFUSED without the handler.
func (s *Server) answerDoH(q *clientQuery) []byte {
	count, ok := s.admit(q.req.Client.Addr())
	if !ok {
		return s.refuse(q.req.Raw, ProtoHTTPS, q.req.Client)
	}
	defer s.release(count)
	return s.handle(&q.req)
}

// dohClientName returns the client name the path gives ("" for DoHPath
// itself), and false for a path that is not DoH's.
func dohClientName(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, DoHPath)
	if !ok {
		return "", false
	}
	if rest == "" {
		return "", true
	}
	name, ok := strings.CutPrefix(rest, "/")
	if !ok || len(name) == 0 || len(name) > maxClientNameLen {
		return "", false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return "", false
		}
	}
	return name, true
}

// readDoHQuery reads the DNS query of r into buf's memory (growing it when
// it is too small) and returns it with http.StatusOK, or the status that
// refuses the request: 405 for a method other than GET and POST, 415 for
// a POST of another media type, 413 for a query over 65,535 bytes, 400
// for anything else that is not a query.
func readDoHQuery(r *http.Request, buf []byte) ([]byte, int) {
	switch r.Method {
	case http.MethodGet:
		v, ok := dnsParam(r.URL.RawQuery)
		if !ok {
			return nil, http.StatusBadRequest
		}
		// RFC 8484 section 4.1: base64url without padding; padding is
		// forgiven.
		v = strings.TrimRight(v, "=")
		n := base64.RawURLEncoding.DecodedLen(len(v))
		if n > maxDNSMessage {
			return nil, http.StatusRequestEntityTooLarge
		}
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		n, err := base64.RawURLEncoding.Decode(buf[:n], []byte(v))
		if err != nil {
			return nil, http.StatusBadRequest
		}
		return buf[:n], http.StatusOK
	case http.MethodPost:
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != dnsMessage {
			return nil, http.StatusUnsupportedMediaType
		}
		if r.ContentLength > maxDNSMessage {
			return nil, http.StatusRequestEntityTooLarge
		}
		b, err := readAtMost(r.Body, buf, maxDNSMessage)
		if errors.Is(err, errTooLarge) {
			return nil, http.StatusRequestEntityTooLarge
		}
		if err != nil {
			return nil, http.StatusBadRequest
		}
		return b, http.StatusOK
	default:
		return nil, http.StatusMethodNotAllowed
	}
}

// maxDNSMessage is the largest DNS message: what a 16-bit length prefix
// can announce, over TCP and TLS alike.
const maxDNSMessage = 0xFFFF

// dnsParam returns the value of the dns parameter of a raw query string,
// without building the map url.Values would.
func dnsParam(raw string) (string, bool) {
	for raw != "" {
		var kv string
		kv, raw, _ = strings.Cut(raw, "&")
		if v, ok := strings.CutPrefix(kv, "dns="); ok && v != "" {
			return v, true
		}
	}
	return "", false
}

var errTooLarge = errors.New("request body too large")

// readAtMost reads r to its end into buf's memory, growing it, and fails
// with errTooLarge past max bytes.
func readAtMost(r io.Reader, buf []byte, max int) ([]byte, error) {
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			if len(buf) > max {
				return nil, errTooLarge
			}
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if len(buf) > max {
			return nil, errTooLarge
		}
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// zapWriter turns net/http's log lines into debug lines of a zap logger.
type zapWriter struct{ log *zap.Logger }

func (w zapWriter) Write(p []byte) (int, error) {
	w.log.Debug("https", zap.String("error", strings.TrimSpace(string(p))))
	return len(p), nil
}

// encrypted is the Server's state for its encrypted listeners.
type encrypted struct {
	dohMu      sync.Mutex // guards dohStopped, and orders dohQueries' Adds before its Wait
	dohStopped bool
	dohQueries sync.WaitGroup // DoH queries being answered
	dotConfig  *tls.Config    // the DoT listeners' TLS configuration, set by Start

	tlsConns map[*tls.Conn]struct{} // guarded by Server.mu: DoH connections in their handshake or served over HTTP/2
}
