// Package wiretest holds fakes for tests of DNS I/O: a loopback DNS server
// (UDP and TCP on one port) driven by a handler of the test's own, handlers
// that answer, refuse, truncate, stall or misbehave, and a refusing port.
//
// It is an ordinary package so that every package's tests can import it;
// production code never does.
package wiretest

import (
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

// Handler serves one query. It runs on a goroutine of the server's: it must
// not call t.Fatal, and it must return once w.Done is closed. Over UDP each
// query gets its own goroutine; over TCP the queries of one connection are
// served one after another, so a stalled handler stalls its connection.
type Handler func(w *Writer, q *dns.Msg)

// Server is a fake DNS server on 127.0.0.1, serving UDP and TCP on the same
// port. NewServer starts it; the test's cleanup stops it and waits for every
// goroutine it started. Its counters tell which protocol served a query and
// whether connections were reused.
type Server struct {
	// Addr is the server's "127.0.0.1:PORT", for UDP and TCP alike.
	Addr string

	handler Handler
	pc      net.PacketConn
	ln      net.Listener
	done    chan struct{} // closed by Close: handlers return, loops stop
	wg      sync.WaitGroup

	udpQueries atomic.Int64
	tcpQueries atomic.Int64
	tcpAccepts atomic.Int64
	probes     probes // health probes: counted and served apart (probe.go)

	mu     sync.Mutex // guards following
	conns  map[net.Conn]struct{}
	errs   []error // reported from the test goroutine at cleanup
	closed bool
}

// NewServer starts a server running h and registers its Close with
// tb.Cleanup. Problems the server meets (an unparsable query, an answer
// that does not pack) are reported with tb.Error at cleanup, from the test
// goroutine.
func NewServer(tb testing.TB, h Handler) *Server {
	tb.Helper()
	s := &Server{handler: h, done: make(chan struct{}), conns: make(map[net.Conn]struct{})}
	if err := s.listen(); err != nil {
		tb.Fatalf("wiretest: starting a server: %v", err)
	}
	tb.Cleanup(func() {
		s.Close()
		for _, err := range s.errors() {
			tb.Errorf("wiretest server %s: %v", s.Addr, err)
		}
	})
	s.wg.Add(2)
	go s.serveUDP()
	go s.serveTCP()
	return s
}

// listen binds a UDP port, then TCP on the same port. Another process may
// hold that TCP port, so it tries a few UDP ports.
func (s *Server) listen() error {
	var lastErr error
	for range 10 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		addr := pc.LocalAddr().String()
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			_ = pc.Close()
			lastErr = err
			continue
		}
		s.pc, s.ln, s.Addr = pc, ln, addr
		return nil
	}
	return fmt.Errorf("no port free for both UDP and TCP: %w", lastErr)
}

// UDPQueries returns the number of queries received over UDP, health
// probes not included.
func (s *Server) UDPQueries() int64 { return s.udpQueries.Load() }

// TCPQueries returns the number of queries received over TCP, health
// probes not included.
func (s *Server) TCPQueries() int64 { return s.tcpQueries.Load() }

// TCPAccepts returns the number of TCP connections accepted: one for any
// number of queries on a reused connection.
func (s *Server) TCPAccepts() int64 { return s.tcpAccepts.Load() }

// Close stops the server: it closes the sockets, unblocks every handler
// through Writer.Done and waits for all of the server's goroutines. It is
// idempotent; the test's cleanup calls it.
func (s *Server) Close() {
	conns, first := s.shut()
	if !first {
		return
	}
	_ = s.pc.Close()
	_ = s.ln.Close()
	for c := range conns {
		_ = c.Close()
	}
	s.wg.Wait()
}

// shut marks s closed and closes done, unblocking every handler, and
// hands over the open connections for the caller to close. first is false
// when s was already closed; then nothing is done. The DoT and DoH fakes
// share it through their core.
func (s *Server) shut() (conns map[net.Conn]struct{}, first bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, false
	}
	s.closed = true
	close(s.done)
	conns, s.conns = s.conns, nil
	return conns, true
}

// report records a problem for the test's cleanup to report.
func (s *Server) report(err error) {
	s.mu.Lock()
	s.errs = append(s.errs, err)
	s.mu.Unlock()
}

func (s *Server) errors() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]error(nil), s.errs...)
}

// stopping reports whether Close has begun; errors then are expected.
func (s *Server) stopping() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

func (s *Server) serveUDP() {
	defer s.wg.Done()
	buf := make([]byte, 65535)
	for {
		n, addr, err := s.pc.ReadFrom(buf)
		if err != nil {
			if !s.stopping() {
				s.report(fmt.Errorf("reading UDP: %w", err))
			}
			return
		}
		q := s.parse(buf[:n], "UDP", &s.udpQueries)
		if q == nil {
			continue
		}
		w := &Writer{srv: s, proto: "udp", pc: s.pc, addr: addr}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.dispatch(s.handler, w, q)
		}()
	}
}

func (s *Server) serveTCP() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if !s.stopping() {
				s.report(fmt.Errorf("accepting TCP: %w", err))
			}
			return
		}
		s.tcpAccepts.Add(1)
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serveConn(c)
	}
}

// serveConn serves the queries of one TCP connection in turn, until the
// client closes it, a handler closes it or the server stops.
func (s *Server) serveConn(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		_ = c.Close()
	}()
	var prefix [2]byte
	for {
		if _, err := io.ReadFull(c, prefix[:]); err != nil {
			return // the client is done with the connection, or Close ran
		}
		raw := make([]byte, binary.BigEndian.Uint16(prefix[:]))
		if _, err := io.ReadFull(c, raw); err != nil {
			if !errors.Is(err, net.ErrClosed) && !s.stopping() {
				s.report(fmt.Errorf("reading a TCP query: %w", err))
			}
			return
		}
		q := s.parse(raw, "TCP", &s.tcpQueries)
		if q == nil {
			return
		}
		w := &Writer{srv: s, proto: "tcp", conn: c}
		s.dispatch(s.handler, w, q)
		if w.connClosed {
			return
		}
	}
}

// Refusing returns "127.0.0.1:PORT" of a port nothing listens on: a
// connected UDP socket sending there reads ECONNREFUSED (the ICMP port
// unreachable), and a TCP dial is refused. The port was bound a moment ago
// and released, so another test is unlikely to take it meanwhile.
func Refusing(tb testing.TB) string {
	tb.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("wiretest: finding a free port: %v", err)
	}
	addr := pc.LocalAddr().String()
	if err := pc.Close(); err != nil {
		tb.Fatalf("wiretest: releasing port %s: %v", addr, err)
	}
	return addr
}

// parse unpacks raw, a query that came over proto ("UDP", "TCP"), and
// counts it in queries (unless it is a probe or a loop check). It returns
// nil, reported, for a query that does not parse or does not ask one
// question.
func (s *Server) parse(raw []byte, proto string, queries *atomic.Int64) *dns.Msg {
	q := new(dns.Msg)
	if err := q.Unpack(raw); err != nil {
		queries.Add(1)
		s.report(fmt.Errorf("unpacking a %s query: %w", proto, err))
		return nil
	}
	s.count(queries, q)
	if len(q.Question) != 1 {
		s.report(fmt.Errorf("a %s query with %d questions", proto, len(q.Question)))
		return nil
	}
	return q
}
