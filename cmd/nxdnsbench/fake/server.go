// Package fake is a fast fake DNS upstream for nxdnsd's benchmarks: it
// answers every query over UDP and TCP (and, when asked, DNS over TLS) at
// once, without unpacking it, so
// that the load generator and the forwarder under test run out of CPU long
// before it does. It also plays the faults the benchmark scenarios need:
// blackhole, delay and refuse, switchable while it runs.
//
// It is test tooling, never imported by nxdnsd itself.
package fake

import (
	"github.com/nxdnsd/nxdnsd/wire/server"

	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Limits that keep a fake bounded whatever its clients do.
const (
	// maxMsgLen is the largest DNS message over either protocol.
	maxMsgLen = 65535

	// maxPending bounds the answers a Delay fake holds; past it queries are
	// dropped (and counted), as a real overloaded server would.
	maxPending = 1 << 16

	// maxTCPConns bounds concurrent TCP and DoT clients, together; more are
	// closed at once.
	maxTCPConns = 512

	// tcpIdleTimeout closes a TCP or DoT client that sends nothing for this
	// long.
	tcpIdleTimeout = 30 * time.Second

	// socketBuffer is the receive and send buffer asked for each UDP
	// socket: deep enough that a burst is queued rather than dropped (the
	// kernel caps it at net.core.rmem_max / wmem_max).
	socketBuffer = 4 << 20

	// listenTries bounds the attempts to find a port free for both UDP and
	// TCP when the caller asks for port 0.
	listenTries = 10
)

// Config is what Start serves.
type Config struct {
	// Addr is the IP:PORT to serve on, UDP and TCP; port 0 picks a free one.
	Addr string

	// Mode is the initial behaviour; SetMode changes it.
	Mode Mode

	// Sockets is the number of UDP sockets bound to the port with
	// SO_REUSEPORT, each with its own reader goroutine, so the kernel
	// spreads clients over them. 0 means runtime.NumCPU().
	Sockets int

	// TLS, when not nil, also serves DNS over TLS (RFC 7858) with this
	// configuration (its certificate) on a TCP port of its own on Addr's
	// IP, TLSAddr: TCP framing inside TLS, pipelined queries answered as
	// the TCP side answers them.
	TLS *tls.Config
}

// Stats counts what a fake saw.
type Stats struct {
	Queries  uint64 // messages read, UDP, TCP and DoT
	Answers  uint64 // answers written (TCP and DoT: queued for the connection's writer)
	Dropped  uint64 // queries dropped: malformed, or past maxPending
	Pending  int64  // delayed answers not yet written
	TCPConns uint64 // TCP connections accepted
	TLSConns uint64 // DoT connections accepted, handshakes that failed included
}

// Server is a running fake upstream. Its methods are safe for concurrent
// use.
type Server struct {
	addr    netip.AddrPort
	udp     []*net.UDPConn // always non-empty
	tcp     *net.TCPListener
	tls     *net.TCPListener // nil unless Config.TLS
	tlsConf *tls.Config
	mode    atomic.Pointer[Mode] // always non-nil

	queue chan delayed // answers held by a Delay mode, in arrival order
	done  chan struct{}
	wg    sync.WaitGroup

	queries, answers, dropped, tcpConns, tlsConns atomic.Uint64
	pending                                       atomic.Int64

	mu     sync.Mutex // guards following
	conns  map[*streamConn]struct{}
	closed bool
}

// Start binds cfg.Addr over UDP and TCP, and a port for DoT when cfg.TLS is
// set, and serves until Close.
func Start(cfg Config) (*Server, error) {
	n := cfg.Sockets
	if n <= 0 {
		n = runtime.NumCPU()
	}
	s := &Server{
		queue: make(chan delayed, maxPending),
		done:  make(chan struct{}),
		conns: make(map[*streamConn]struct{}),
	}
	if cfg.TLS != nil {
		s.tlsConf = cfg.TLS.Clone()
		if s.tlsConf.MinVersion < tls.VersionTLS12 {
			s.tlsConf.MinVersion = tls.VersionTLS12 // RFC 7858 and RFC 8310
		}
	}
	mode := cfg.Mode
	s.mode.Store(&mode)
	if err := s.listen(cfg.Addr, n); err != nil {
		return nil, err
	}
	for _, pc := range s.udp {
		s.wg.Add(1)
		go s.readUDP(pc)
	}
	s.wg.Add(2)
	go s.acceptStream(s.tcp, nil, &s.tcpConns)
	go s.writeDelayed()
	if s.tls != nil {
		s.wg.Add(1)
		go s.acceptStream(s.tls, s.tlsConf, &s.tlsConns)
	}
	return s, nil
}

// listen binds n UDP sockets and one TCP listener on one port, and the DoT
// listener on another when TLS is configured.
func (s *Server) listen(addr string, n int) error {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return fmt.Errorf("fake: listen address %q: %w", addr, err)
	}
	tries := 1
	if ap.Port() == 0 {
		tries = listenTries
	}
	for range tries {
		if err = s.listenOnce(ap, n); err == nil {
			return nil
		}
	}
	return err
}

func (s *Server) listenOnce(ap netip.AddrPort, n int) error {
	udp, err := server.ListenUDP(ap, n)
	if err != nil {
		return err
	}
	port := udp[0].LocalAddr().(*net.UDPAddr).AddrPort().Port()
	bound := netip.AddrPortFrom(ap.Addr(), port)
	tl, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(bound))
	if err != nil {
		for _, pc := range udp {
			_ = pc.Close()
		}
		return fmt.Errorf("fake: listening on tcp %s: %w", bound, err)
	}
	var dot *net.TCPListener
	if s.tlsConf != nil {
		dot, err = net.ListenTCP("tcp", net.TCPAddrFromAddrPort(netip.AddrPortFrom(ap.Addr(), 0)))
		if err != nil {
			_ = tl.Close()
			for _, pc := range udp {
				_ = pc.Close()
			}
			return fmt.Errorf("fake: listening for dns over tls on %s: %w", ap.Addr(), err)
		}
	}
	for _, pc := range udp {
		_ = pc.SetReadBuffer(socketBuffer)  // best effort: capped by the kernel
		_ = pc.SetWriteBuffer(socketBuffer) // likewise
	}
	s.addr, s.udp, s.tcp, s.tls = bound, udp, tl, dot
	return nil
}

// Addr returns the bound address, the same for UDP and TCP.
func (s *Server) Addr() netip.AddrPort { return s.addr }

// TLSAddr returns the DoT listener's address, or the zero AddrPort when the
// server was started without Config.TLS.
func (s *Server) TLSAddr() netip.AddrPort {
	if s.tls == nil {
		return netip.AddrPort{}
	}
	return s.tls.Addr().(*net.TCPAddr).AddrPort()
}

// Mode returns the current behaviour.
func (s *Server) Mode() Mode { return *s.mode.Load() }

// SetMode changes the behaviour for every query read from now on. Answers
// already held by a Delay mode are still written.
func (s *Server) SetMode(m Mode) { s.mode.Store(&m) }

// Stats returns the counters so far.
func (s *Server) Stats() Stats {
	return Stats{
		Queries:  s.queries.Load(),
		Answers:  s.answers.Load(),
		Dropped:  s.dropped.Load(),
		Pending:  s.pending.Load(),
		TCPConns: s.tcpConns.Load(),
		TLSConns: s.tlsConns.Load(),
	}
}

// Sub returns the counts of s since earlier, a Stats of the same server
// taken before; Pending is s's own.
func (s Stats) Sub(earlier Stats) Stats {
	return Stats{
		Queries:  s.Queries - earlier.Queries,
		Answers:  s.Answers - earlier.Answers,
		Dropped:  s.Dropped - earlier.Dropped,
		Pending:  s.Pending,
		TCPConns: s.TCPConns - earlier.TCPConns,
		TLSConns: s.TLSConns - earlier.TLSConns,
	}
}

// Close stops serving, drops held answers and returns once every goroutine
// of the server has ended.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	conns := s.conns
	s.conns = nil
	s.mu.Unlock()

	close(s.done)
	err := s.tcp.Close()
	if s.tls != nil {
		err = errors.Join(err, s.tls.Close())
	}
	for _, pc := range s.udp {
		err = errors.Join(err, pc.Close())
	}
	for c := range conns {
		_ = c.Close()
	}
	s.wg.Wait()
	return err
}

// readUDP answers the datagrams of one socket until it is closed. Its two
// buffers are its own: a query is answered in place in the read buffer.
func (s *Server) readUDP(pc *net.UDPConn) {
	defer s.wg.Done()
	buf := make([]byte, maxMsgLen+Headroom)
	for {
		n, from, err := pc.ReadFromUDPAddrPort(buf[:maxMsgLen])
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // an ICMP error of an earlier write, say: one datagram's business
		}
		s.queries.Add(1)
		switch mode := s.mode.Load(); mode.Kind {
		case Blackhole:
		case Delay:
			s.hold(buf[:n], mode.Delay, udpReply{pc: pc, to: from})
		default:
			if out := s.answer(buf, n, mode.Kind); out != nil {
				if _, err := pc.WriteToUDPAddrPort(out, from); err == nil {
					s.answers.Add(1)
				}
			}
		}
	}
}

// answer answers the query in b[:n] in place, as an Answer or Refuse mode
// does, and returns the answer, or nil when the query is to be dropped.
func (s *Server) answer(b []byte, n int, k Kind) []byte {
	rcode := 0
	if k == Refuse {
		rcode = rcodeRefused
	}
	m := Respond(b, n, rcode)
	if m == 0 {
		s.dropped.Add(1)
		return nil
	}
	return b[:m]
}

// replier sends one held answer back where its query came from.
type replier interface {
	reply(b []byte) error
}

// delayed is an answer a Delay mode holds until due.
type delayed struct {
	due time.Time
	msg []byte
	to  replier
}

type udpReply struct {
	pc *net.UDPConn
	to netip.AddrPort
}

func (r udpReply) reply(b []byte) error {
	_, err := r.pc.WriteToUDPAddrPort(b, r.to)
	return err
}

// hold answers query q now, into a copy, and queues the answer to be sent
// to r after delay. Past maxPending the query is dropped.
func (s *Server) hold(q []byte, delay time.Duration, to replier) {
	b := make([]byte, len(q)+Headroom)
	copy(b, q)
	m := Respond(b, len(q), 0)
	if m == 0 {
		s.dropped.Add(1)
		return
	}
	d := delayed{due: time.Now().Add(delay), msg: b[:m], to: to}
	select {
	case s.queue <- d:
		s.pending.Add(1)
	default:
		s.dropped.Add(1)
	}
}

// writeDelayed sends held answers when they fall due. Every answer of a
// mode is held equally long, so arrival order is due order and one timer
// serves the whole queue.
func (s *Server) writeDelayed() {
	defer s.wg.Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		var d delayed
		select {
		case d = <-s.queue:
		case <-s.done:
			return
		}
		if wait := time.Until(d.due); wait > 0 {
			t.Reset(wait)
			select {
			case <-t.C:
			case <-s.done:
				return
			}
		}
		s.pending.Add(-1)
		if d.to.reply(d.msg) == nil {
			s.answers.Add(1)
		}
	}
}
