package wiretest

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/miekg/dns"
)

// DoTServer is a fake DNS-over-TLS server (RFC 7858) on 127.0.0.1, driven
// by a Handler like Server. NewDoTServer starts it; the test's cleanup stops
// it and waits for every goroutine it started.
//
// Unlike Server's TCP side it serves the queries of one connection
// concurrently, each on its own goroutine, and writes each answer when its
// handler does: answers come out of order when handlers take different
// times, as RFC 7766 allows and real resolvers do. Handlers see Proto()
// "tcp" (DoT is TCP framing inside TLS), so Writer.CloseConn closes the
// connection the query came on, with every other query on it.
type DoTServer struct {
	// Addr is the server's "127.0.0.1:PORT".
	Addr string

	handler Handler
	ln      net.Listener // TLS
	core    *Server      // the Writers' server: its done channel, problems and connections
	wg      sync.WaitGroup

	accepts atomic.Int64
	queries atomic.Int64
}

// NewDoTServer starts a DoT server presenting cert and running h, and
// registers its Close with tb.Cleanup. Problems it meets (an unparsable
// query, an answer that does not pack) are reported with tb.Error at
// cleanup; handshakes the client refuses are not problems.
func NewDoTServer(tb testing.TB, cert tls.Certificate, h Handler) *DoTServer {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("wiretest: starting a DoT server: %v", err)
	}
	conf := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	s := &DoTServer{
		Addr:    ln.Addr().String(),
		handler: h,
		ln:      tls.NewListener(ln, conf),
		core:    &Server{done: make(chan struct{}), conns: make(map[net.Conn]struct{})},
	}
	tb.Cleanup(func() {
		s.Close()
		for _, err := range s.core.errors() {
			tb.Errorf("wiretest DoT server %s: %v", s.Addr, err)
		}
	})
	s.wg.Add(1)
	go s.serve()
	return s
}

// Upstream returns the server's upstream address, "tls://dns.test:PORT":
// it names TLSName, so a transport must pin the dial to 127.0.0.1.
func (s *DoTServer) Upstream() string {
	_, port, _ := net.SplitHostPort(s.Addr)
	return "tls://" + net.JoinHostPort(TLSName, port)
}

// Accepts returns the number of TCP connections accepted, handshakes that
// failed included: one for any number of queries on a reused connection.
func (s *DoTServer) Accepts() int64 { return s.accepts.Load() }

// Queries returns the number of queries received, health probes not
// included.
func (s *DoTServer) Queries() int64 { return s.queries.Load() }

// CloseConns closes every connection open now, between queries, as a
// server's idle timeout does; the server goes on accepting new ones.
func (s *DoTServer) CloseConns() {
	s.core.mu.Lock()
	conns := make([]net.Conn, 0, len(s.core.conns))
	for c := range s.core.conns {
		conns = append(conns, c)
	}
	s.core.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// Close stops the server: it closes the listener and every connection,
// unblocks every handler through Writer.Done and waits for all of the
// server's goroutines. It is idempotent; the test's cleanup calls it.
func (s *DoTServer) Close() {
	conns, first := s.core.shut()
	if !first {
		return
	}
	_ = s.ln.Close()
	for conn := range conns {
		_ = conn.Close()
	}
	s.wg.Wait()
}

func (s *DoTServer) serve() {
	defer s.wg.Done()
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			if !s.core.stopping() {
				s.core.report(fmt.Errorf("accepting: %w", err))
			}
			return
		}
		s.accepts.Add(1)
		s.core.mu.Lock()
		if s.core.closed {
			s.core.mu.Unlock()
			_ = conn.Close()
			return
		}
		s.core.conns[conn] = struct{}{}
		s.core.mu.Unlock()
		s.wg.Add(1)
		go s.serveConn(conn)
	}
}

// serveConn reads the queries of one connection and starts a handler for
// each, until the client closes it, a handler closes it or the server
// stops. The handshake happens on the first read; a refused one ends the
// connection quietly.
func (s *DoTServer) serveConn(conn net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.core.mu.Lock()
		delete(s.core.conns, conn)
		s.core.mu.Unlock()
		_ = conn.Close()
	}()
	var prefix [2]byte
	for {
		if _, err := io.ReadFull(conn, prefix[:]); err != nil {
			return // the client is done, the handshake failed, or Close ran
		}
		raw := make([]byte, binary.BigEndian.Uint16(prefix[:]))
		if _, err := io.ReadFull(conn, raw); err != nil {
			if !errors.Is(err, net.ErrClosed) && !s.core.stopping() {
				s.core.report(fmt.Errorf("reading a DoT query: %w", err))
			}
			return
		}
		q := new(dns.Msg)
		if err := q.Unpack(raw); err != nil {
			s.queries.Add(1)
			s.core.report(fmt.Errorf("unpacking a DoT query: %w", err))
			return
		}
		s.core.count(&s.queries, q)
		if len(q.Question) != 1 {
			s.core.report(fmt.Errorf("a DoT query with %d questions", len(q.Question)))
			return
		}
		// tls.Conn's Write is safe for concurrent use and writes each
		// call whole, so concurrent handlers never interleave frames.
		w := &Writer{srv: s.core, proto: "tcp", conn: conn}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.core.dispatch(s.handler, w, q)
		}()
	}
}
