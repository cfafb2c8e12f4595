package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"

	"github.com/nxdnsd/nxdnsd/wire/dnsmsg"
)

// Defaults for the Server fields left at zero; they are the [server]
// defaults of the specification, so a zero Server behaves like nxdnsd with
// an empty configuration.
const (
	DefaultTCPIdleTimeout       = 10 * time.Second
	DefaultMaxTCPConnections    = 1024
	DefaultMaxConcurrentQueries = 4096
	DefaultUDPBatch             = 16
)

// Request is one client query as received.
type Request struct {
	// Raw is the query as it came off the wire, at least a header long.
	// It is read-only and valid only until ServeDNS returns: the server
	// reuses its memory for later queries, and builds the SERVFAIL that
	// answers a panicking handler from it.
	Raw []byte

	// Proto is "udp", "tcp", "tls" (DNS over TLS) or "https" (DNS over
	// HTTPS).
	Proto string

	// ClientName is the name the client gave itself, or "": the NAME of a
	// DoH request to /dns-query/NAME (letters a-z, digits and hyphens, 1
	// to 63 of them). It is the client's own claim, not a proof.
	ClientName string

	// Client is the address and port the query came from, IPv4 unmapped.
	Client netip.AddrPort

	// Answer is memory the handler may build its answer in (its
	// capacity; it may be nil). The server keeps it until the answer is
	// written.
	Answer []byte

	// Pending is what a FastHandler's ServeFast kept of a query it handed
	// on, or nil: a worker finishes the query with Pending.Serve instead
	// of Handler.ServeDNS. The server only carries it to the worker, with
	// a copy of Raw.
	Pending Pending
}

// Pending is a query that a FastHandler began and handed on (see
// Request.Pending). Exactly one of its methods is called, once: Serve on a
// worker, with a copy of the query's Raw and an Answer buffer of the
// worker's, or Abandon when the server refuses the query after all
// (overload), so that whatever ServeFast kept for it is given back.
type Pending interface {
	Serve(ctx context.Context, req *Request) []byte
	Abandon()
}

// Handler answers client queries.
//
// ServeDNS returns the bytes of the answer, or nil to send nothing. The
// server writes them as they are: for UDP the handler itself fits the answer
// to the client's EDNS size (truncating with TC set), for TCP the server adds
// the length prefix. The server does not keep the returned slice after
// writing it.
//
// ServeDNS is called concurrently, once per query, at most
// Server.MaxConcurrentQueries times at once. ctx is cancelled only when a
// Shutdown's own context expires, so queries in flight at shutdown normally
// run to completion; the handler bounds each query's time itself.
type Handler interface {
	ServeDNS(ctx context.Context, req *Request) []byte
}

// FastHandler is a Handler that can answer some queries without waiting
// for anything (a cache hit, a name it owns). The UDP listener calls
// ServeFast on its own goroutine for every datagram, before admission, and
// hands the query to a worker's ServeDNS only when it was not handled: an
// answer that needs no resolver costs no goroutine handoff. ServeFast must
// never block; a handled query with a nil answer is dropped. req.Raw and
// req.Answer are the listener's own buffers, valid during the call.
//
// A query ServeFast did not handle goes to a worker: to req.Pending's
// Serve when ServeFast set it, else to ServeDNS.
type FastHandler interface {
	Handler
	ServeFast(req *Request) (answer []byte, handled bool)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, req *Request) []byte

var _ Handler = HandlerFunc(nil)

// ServeDNS calls f(ctx, req).
func (f HandlerFunc) ServeDNS(ctx context.Context, req *Request) []byte {
	return f(ctx, req)
}

// Server serves client queries on UDP and TCP for every address in Listen,
// over TLS for every address in TLSListen and over HTTPS for every address
// in HTTPSListen.
//
// Set the fields, call Start, and Shutdown to stop; a Server is not
// restarted. The fields must not be changed after Start.
type Server struct {
	// Listen holds "IP:PORT" addresses, each served on UDP and TCP. Port 0
	// picks a free port (per protocol); Addrs tells which.
	Listen []string

	// TLSListen holds "IP:PORT" addresses served with DNS over TLS (RFC
	// 7858), HTTPSListen those served with DNS over HTTPS (RFC 8484,
	// server_https.go); both need TLSConfig. Their connections are client
	// TCP connections like any other: they count toward MaxTCPConnections
	// and are closed after TCPIdleTimeout without a whole query.
	TLSListen   []string
	HTTPSListen []string

	// TLSConfig is the TLS configuration of TLSListen and HTTPSListen, or
	// nil when there are none. Its GetCertificate (or Certificates) gives
	// the certificate; one that reads an atomic pointer lets a reload
	// rotate it for the next connection. The Server clones it and sets
	// its own NextProtos.
	TLSConfig *tls.Config

	// Handler answers every admitted query; it must be non-nil.
	Handler Handler

	// TCPIdleTimeout bounds the time a TCP client has to deliver each
	// whole query, the length prefix included, and the time one answer may
	// take to be written to it. A client that trickles, announces a length
	// it never sends, or never reads is disconnected after it. Default
	// DefaultTCPIdleTimeout.
	TCPIdleTimeout time.Duration

	// MaxTCPConnections bounds the client TCP connections open at once
	// across all addresses; a connection past it is closed as soon as it
	// is accepted. Default DefaultMaxTCPConnections.
	MaxTCPConnections int

	// MaxClientTCPConnections bounds the TCP connections of one client
	// address open at once; a connection past it is closed as soon as it
	// is accepted, so that one address cannot hold every connection.
	// Default ClientShare(MaxTCPConnections).
	MaxClientTCPConnections int

	// MaxQueriesPerConnection bounds the queries of one TCP connection
	// being served at once. At the bound the connection's read loop reads
	// no further query until one is answered: a client pipelining more
	// waits, it is not refused. Default DefaultMaxQueriesPerConnection.
	MaxQueriesPerConnection int

	// MaxConcurrentQueries bounds the queries being served at once, UDP and
	// TCP together, from admission until the answer is written. A query
	// past it is answered REFUSED without calling Handler, so a flood
	// never grows the number of goroutines. Default
	// DefaultMaxConcurrentQueries.
	MaxConcurrentQueries int

	// MaxClientQueries bounds the queries of one client address being
	// served at once, UDP and TCP together, counted as clientCounts
	// says. A query past it is answered REFUSED, as one past
	// MaxConcurrentQueries is, and reported to OnOverload. Default
	// ClientShare(MaxConcurrentQueries).
	MaxClientQueries int

	// UDPSockets is how many UDP sockets each address gets, bound with
	// SO_REUSEPORT, each with a reader of its own: with a FastHandler the
	// readers answer cache hits themselves, and one reader per core lets
	// them do so in parallel. Default 1.
	UDPSockets int

	// UDPBatch is how many datagrams a UDP reader takes from its socket
	// with one system call at most, and so how many answers it made itself
	// it sends with one (recvmmsg and sendmmsg, on Linux; elsewhere one at
	// a time). 1 reads them one at a time. Default DefaultUDPBatch.
	UDPBatch int

	// Logger receives operational logs, or nil for none.
	Logger *zap.Logger

	// OnOverload, or nil, is called once for each query answered REFUSED
	// because MaxConcurrentQueries or MaxClientQueries was reached, before
	// the answer is sent (the nxdns_overload_refused_total counter, the
	// query log), with the query's bytes (valid during the call only), its
	// protocol and its client. It runs on the listener's goroutine: it
	// must not block.
	OnOverload func(raw []byte, proto string, client netip.AddrPort)

	// OnPanic, or nil, is called once for each panic recovered from
	// Handler, before the SERVFAIL is sent (the nxdns_panics_total
	// counter).
	OnPanic func()

	// Admission, or nil, is admission state shared with other Servers
	// (see Admission): their limits then hold for all of them together.
	// Nil: the Server's own.
	Admission *Admission

	// Set by Start and read-only afterwards.
	log              *zap.Logger
	idle             time.Duration
	maxTCP           int
	maxClientTCP     int
	maxConnQueries   int
	maxQueries       int64      // MaxConcurrentQueries or its default
	maxClientQueries int32      // MaxClientQueries or its default
	adm              *Admission // Admission, or the Server's own
	base             context.Context
	cancel           context.CancelFunc
	done             chan struct{}     // closed when Shutdown begins; wakes backoff waits and idle workers
	udpWork          chan *clientQuery // unbuffered: a send succeeds only when a UDP worker is idle; closed once its senders end
	udp              []*net.UDPConn    // every UDP socket, UDPSockets per address
	udpAddrs         []net.Addr        // one per address, in the order of Listen
	listeners        []*net.TCPListener
	tlsListeners     []*net.TCPListener // TLSListen's, in its order
	https            []*httpsListener   // HTTPSListen's, in its order
	encrypted                           // the state of the encrypted listeners (server_https.go)

	// closing is raised by Shutdown before it pushes read deadlines into
	// the past; a loop that sets its own deadline checks it afterwards, so
	// one of the two always sees the other (see clientConn.serve).
	closing atomic.Bool
	// aborted is raised, the same way, when Shutdown's context expires and
	// answers still being written are given up.
	aborted atomic.Bool

	// reapEvery (0: udpWorkerIdle) and reaped (nil: none, else called after
	// each reap) let tests run the UDP worker reaper fast and follow it.
	reapEvery time.Duration
	reaped    func()

	// accepted (nil: none) hears of each TCP connection startConn took
	// (true) or closed at once (false), so that tests can follow a flood.
	accepted func(client netip.Addr, taken bool)

	peak    atomic.Int64 // the most in flight at once since the UDP worker reaper last looked
	workers atomic.Int64 // UDP workers alive

	wg         sync.WaitGroup // every goroutine the server started
	udpSenders sync.WaitGroup // the goroutines that send on udpWork: the UDP readers and the reaper

	closeUDP sync.Once // the last step of Shutdown, whichever call gets there

	mu      sync.Mutex // guards following
	started bool
	stopped bool
	conns   map[*clientConn]struct{} // open client TCP connections of this Server
}

// Start binds every address on UDP and TCP and starts serving. It binds
// everything or nothing: on an error it closes what it had opened.
func (s *Server) Start() error {
	if s.Handler == nil {
		return errors.New("wire: server has no handler")
	}
	if len(s.Listen)+len(s.TLSListen)+len(s.HTTPSListen) == 0 {
		return errors.New("wire: server has no listen address")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return errors.New("wire: server is shut down")
	}
	if s.started {
		return errors.New("wire: server already started")
	}
	if err := s.bindLocked(); err != nil {
		return err
	}
	s.started = true

	s.log = s.Logger
	if s.log == nil {
		s.log = zap.NewNop()
	}
	s.idle = positiveOr(s.TCPIdleTimeout, DefaultTCPIdleTimeout)
	s.maxTCP = positiveOr(s.MaxTCPConnections, DefaultMaxTCPConnections)
	s.maxQueries = int64(positiveOr(s.MaxConcurrentQueries, DefaultMaxConcurrentQueries))
	s.maxClientTCP = min(positiveOr(s.MaxClientTCPConnections, ClientShare(s.maxTCP)), s.maxTCP)
	s.maxConnQueries = positiveOr(s.MaxQueriesPerConnection, DefaultMaxQueriesPerConnection)
	s.maxClientQueries = int32(min(positiveOr(s.MaxClientQueries, ClientShare(int(s.maxQueries))), int(s.maxQueries), math.MaxInt32))
	s.adm = s.Admission
	if s.adm == nil {
		s.adm = NewAdmission()
	}
	s.base, s.cancel = context.WithCancel(context.Background())
	s.done = make(chan struct{})
	s.udpWork = make(chan *clientQuery)
	s.conns = make(map[*clientConn]struct{})

	// One reader per socket: it only reads, admits and hands the datagram
	// to a worker, which one goroutine does far faster than queries are
	// answered. A reader per core made them queue for the socket's read
	// lock, parking and waking each other (measured side by side under
	// dnsperf: +8 % QPS, -7 % CPU per query with one).
	for _, pc := range s.udp {
		s.udpSenders.Add(1)
		s.wg.Go(func() {
			defer s.udpSenders.Done()
			s.readUDP(pc, positiveOr(s.UDPBatch, DefaultUDPBatch))
		})
	}
	// One line per address, not per socket: the sockets of an address
	// share it (SO_REUSEPORT).
	for _, a := range s.udpAddrs {
		s.log.Info("serving", zap.String("proto", "udp"), zap.Stringer("addr", a), zap.Int("sockets", len(s.udp)/len(s.udpAddrs)))
	}
	s.udpSenders.Add(1)
	s.wg.Go(func() {
		defer s.udpSenders.Done()
		s.reapUDPWorkers()
	})
	// Idle workers wait on udpWork alone, not on done as well: a select
	// would lock done's channel, which every worker shares, on each query.
	// Closing udpWork once nothing can send on it any more ends them.
	s.wg.Go(func() {
		s.udpSenders.Wait()
		close(s.udpWork)
	})
	for _, l := range s.listeners {
		s.wg.Go(func() { s.acceptTCP(l, "tcp") })
		s.log.Info("serving", zap.String("proto", "tcp"), zap.Stringer("addr", l.Addr()))
	}
	s.startEncrypted()
	return nil
}

// bindLocked opens every socket, or none.
func (s *Server) bindLocked() (err error) {
	defer func() {
		if err != nil {
			for _, pc := range s.udp {
				pc.Close()
			}
			for _, l := range s.listeners {
				l.Close()
			}
			s.closeEncryptedLocked()
			s.udp, s.udpAddrs, s.listeners = nil, nil, nil
		}
	}()
	if err := s.bindEncryptedLocked(); err != nil {
		return err
	}
	for _, a := range s.Listen {
		ap, err := netip.ParseAddrPort(a)
		if err != nil {
			return fmt.Errorf("parsing listen address %q: %w", a, err)
		}
		pcs, err := ListenUDP(ap, s.UDPSockets)
		if err != nil {
			return bindError("udp", ap, err)
		}
		if ap.Addr().IsUnspecified() {
			for _, pc := range pcs {
				if err := recvDestination(pc, !ap.Addr().Is4()); err != nil && s.Logger != nil {
					s.Logger.Warn("a wildcard socket will answer from the kernel's choice of address", zap.Error(err))
				}
			}
		}
		s.udp = append(s.udp, pcs...)
		s.udpAddrs = append(s.udpAddrs, pcs[0].LocalAddr())
		l, err := net.ListenTCP(tcpNetwork(ap), net.TCPAddrFromAddrPort(ap))
		if err != nil {
			return bindError("tcp", ap, err)
		}
		s.listeners = append(s.listeners, l)
	}
	return nil
}

// udpNetwork and tcpNetwork name the family of ap's socket: 0.0.0.0 binds
// IPv4 only and [::] IPv6 only (Go's "udp" and "tcp" would bind 0.0.0.0 on
// both families, so that [::] beside it could not be bound).
func udpNetwork(ap netip.AddrPort) string {
	if ap.Addr().Is4() {
		return "udp4"
	}
	return "udp6"
}

func tcpNetwork(ap netip.AddrPort) string {
	if ap.Addr().Is4() {
		return "tcp4"
	}
	return "tcp6"
}

// Addrs returns the addresses actually bound, in the order of Listen; nil
// before Start.
func (s *Server) Addrs() (udp []net.Addr, tcp []net.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	udp = append(udp, s.udpAddrs...)
	for _, l := range s.listeners {
		tcp = append(tcp, l.Addr())
	}
	return udp, tcp
}

// admit takes a query permit for a query of client without waiting, and
// returns the client's count, which release needs back. It reports false
// when MaxConcurrentQueries are being served, or MaxClientQueries of the
// client's; the caller then answers REFUSED itself instead of starting a
// goroutine.
func (s *Server) admit(client netip.Addr) (*atomic.Int32, bool) {
	c := s.adm.clients.count(client)
	if c.Add(1) > s.maxClientQueries {
		c.Add(-1)
		return nil, false
	}
	n := s.adm.inflight.Add(1)
	if n > s.maxQueries {
		s.adm.inflight.Add(-1)
		c.Add(-1)
		return nil, false
	}
	if n > s.peak.Load() {
		s.peak.Store(n) // a lost race only lowers the reaper's estimate for one period
	}
	return c, true
}

// release returns the permit taken by a successful admit, c the count it
// returned.
func (s *Server) release(c *atomic.Int32) {
	c.Add(-1)
	s.adm.inflight.Add(-1)
}

// refuse builds the answer to a query past the concurrency limit from its
// header and question alone, and counts it; nil means send nothing (raw is
// itself a response, which is neither answered nor counted).
func (s *Server) refuse(raw []byte, proto string, client netip.AddrPort) []byte {
	answer := dnsmsg.Refused(raw)
	if answer != nil && s.OnOverload != nil {
		s.OnOverload(raw, proto, client)
	}
	return answer
}

// handleFast runs a FastHandler's ServeFast on a listener's goroutine, a
// panic contained as handle contains it: handled, answered SERVFAIL.
func (s *Server) handleFast(fh FastHandler, req *Request) (answer []byte, handled bool) {
	defer func() {
		if r := recover(); r != nil {
			answer, handled = s.recovered(r, req), true
		}
	}()
	return fh.ServeFast(req)
}

// handle runs the handler for an admitted query, or finishes what the fast
// path began of it (req.Pending). A panic in the handler is
// contained here: logged with its stack, counted, and answered SERVFAIL,
// so one bad query cannot take the server down.
func (s *Server) handle(req *Request) (answer []byte) {
	defer func() {
		if r := recover(); r != nil {
			answer = s.recovered(r, req)
		}
	}()
	if p := req.Pending; p != nil {
		req.Pending = nil
		return p.Serve(s.base, req)
	}
	return s.Handler.ServeDNS(s.base, req)
}

// recovered logs and counts a panic r of the handler serving req, and
// returns the SERVFAIL that answers req instead.
func (s *Server) recovered(r any, req *Request) []byte {
	s.log.Error("panic serving query",
		zap.Any("panic", r),
		zap.String("proto", req.Proto),
		zap.Stringer("client", req.Client),
		zap.Stack("stack"))
	if s.OnPanic != nil {
		s.OnPanic()
	}
	// Built from the bytes: the query may be what made it panic.
	return dnsmsg.Reply(req.Raw, dns.RcodeServerFailure)
}

func positiveOr[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}
