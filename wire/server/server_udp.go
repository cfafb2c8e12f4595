package server

import (
	"net"
	"net/netip"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/nxdnsd/nxdnsd/wire/dnsmsg"
)

// udpReadBufLen is the room a reader has for each datagram, on every
// platform and whether it reads them in batches or one at a time. Of a
// longer datagram (nothing a resolver sends: a query carries one question
// and an OPT record) the handler gets the first udpReadBufLen bytes, and
// its rules decide: a query whose records run past them is malformed,
// answered FORMERR, counted and logged as any other. (Windows, where a
// datagram longer than the buffer is a read error, drops it instead.)
const udpReadBufLen = 4096

// udpIn is how a reader loop takes datagrams from its socket and sends the
// answers it made itself: on Linux several at a time, with one recvmmsg and
// one sendmmsg (udpBatch), elsewhere or with UDPBatch 1 one at a time
// through the net package (udpSingle).
type udpIn interface {
	// read waits for datagrams and takes those queued, returning how
	// many, or an error.
	read() (int, error)
	// datagram returns the i-th datagram of the last read (its first
	// udpReadBufLen bytes), its sender, and on a wildcard socket the
	// address it was sent to with its interface.
	datagram(i int) (raw []byte, from netip.AddrPort, local netip.Addr, ifindex int32)
	// answerBuf is the memory datagram i's answer may be built in.
	answerBuf(i int) []byte
	// queue has answer go back to datagram i's sender, from local when it
	// is valid, at the next flush; answer must stay as it is until then.
	queue(i int, answer []byte, local netip.Addr, ifindex int32)
	// flush sends the answers queued since the last read, logging to log
	// those that fail.
	flush(log *zap.Logger)
}

// readUDP is pc's reader loop, taking up to batch datagrams per system
// call where it can. It ends when Shutdown pushes pc's read deadline into
// the past.
func (s *Server) readUDP(pc *net.UDPConn, batch int) {
	s.readFrom(newUDPIn(pc, batch), s.newUDPReader(pc))
}

// readFrom is the reader loop on in: each datagram read is offered to r
// (see take), and the answers made on this goroutine go back together
// after each read.
//
// Each admitted query is copied into a pooled buffer and handed to an idle
// worker, or to a new one when none is idle; a query past the concurrency
// limit is refused from this loop. Busy workers never outnumber admitted
// queries, so the number of goroutines stays below the readers +
// MaxConcurrentQueries (plus workers idling out) however fast datagrams
// arrive.
func (s *Server) readFrom(in udpIn, r *udpReader) {
	var fails int
	var backoff time.Duration
	for {
		n, err := in.read()
		if err != nil {
			if s.ended(err) {
				return
			}
			// Anything else is a resource shortage or a socket gone
			// bad, not a datagram's fault on an unconnected socket: the
			// first of a run is retried at once (it may have concerned
			// one datagram), the next back off as acceptTCP does
			// instead of spinning on them.
			if fails++; fails == 1 {
				s.log.Debug("reading udp", zap.Error(err))
				continue
			}
			if !s.backOff(&backoff, "reading udp", err) {
				return
			}
			continue
		}
		fails, backoff = 0, 0
		for i := range n {
			raw, from, local, ifindex := in.datagram(i)
			if !from.IsValid() {
				continue
			}
			if answer := r.take(raw, from, local, ifindex, in.answerBuf(i)); answer != nil {
				in.queue(i, answer, local, ifindex)
			}
		}
		in.flush(s.log)
	}
}

// udpSingle reads a socket one datagram at a time through the net
// package, and sends the answer made for it the same way.
type udpSingle struct {
	pc  *net.UDPConn
	buf []byte // udpReadBufLen
	oob []byte // 2 pktinfoLen on a wildcard socket (see recvDestination); else nil
	out []byte // the answers made on the reader

	// The last datagram, and the answer queued for it, or nil.
	n       int
	from    netip.AddrPort
	local   netip.Addr
	ifindex int32
	answer  []byte
}

var _ udpIn = (*udpSingle)(nil)

func newUDPSingle(pc *net.UDPConn) *udpSingle {
	u := &udpSingle{pc: pc, buf: make([]byte, udpReadBufLen), out: make([]byte, 0, clientAnswerBufLen)}
	if la, ok := pc.LocalAddr().(*net.UDPAddr); ok && la.IP.IsUnspecified() && pktinfoLen > 0 {
		u.oob = make([]byte, 2*pktinfoLen)
	}
	return u
}

func (u *udpSingle) read() (int, error) {
	var err error
	u.local, u.ifindex = netip.Addr{}, 0
	if u.oob != nil {
		var oobn int
		u.n, oobn, _, u.from, err = u.pc.ReadMsgUDPAddrPort(u.buf, u.oob)
		if err == nil {
			u.local, u.ifindex, _ = destination(u.oob[:oobn])
		}
	} else {
		u.n, u.from, err = u.pc.ReadFromUDPAddrPort(u.buf)
	}
	if err != nil {
		return 0, err
	}
	return 1, nil
}

func (u *udpSingle) datagram(int) ([]byte, netip.AddrPort, netip.Addr, int32) {
	return u.buf[:u.n], u.from, u.local, u.ifindex
}

func (u *udpSingle) answerBuf(int) []byte { return u.out[:0] }

func (u *udpSingle) queue(_ int, answer []byte, _ netip.Addr, _ int32) { u.answer = answer }

func (u *udpSingle) flush(log *zap.Logger) {
	if u.answer != nil {
		writeUDP(u.pc, u.answer, u.from, u.local, u.ifindex, log)
		u.answer = nil
	}
}

// udpReader is what a UDP reader loop keeps between datagrams.
type udpReader struct {
	s    *Server
	pc   *net.UDPConn
	fast FastHandler     // the Handler, when it is one
	req  *Request        // the fast path's, reused: one allocation per reader
	rc   syscall.RawConn // pc's, for the workers' udpSender; or nil
	v6   bool            // pc is an IPv6 socket
}

func (s *Server) newUDPReader(pc *net.UDPConn) *udpReader {
	fast, _ := s.Handler.(FastHandler)
	la, _ := pc.LocalAddr().(*net.UDPAddr)
	v6 := la != nil && la.IP.To4() == nil
	return &udpReader{s: s, pc: pc, fast: fast, req: new(Request), rc: rawConn(pc), v6: v6}
}

// take serves the datagram raw that came from from (to local, on
// interface ifindex, on a wildcard socket): answered on the reader when
// the FastHandler can, refused past admission, or copied into a pooled
// buffer and handed to an idle worker, or to a new one when none is idle.
// It returns the answer for the reader to send, or nil. An answer made
// here is built in out (its capacity) or in memory of its own.
func (r *udpReader) take(raw []byte, from netip.AddrPort, local netip.Addr, ifindex int32, out []byte) []byte {
	s := r.s
	if len(raw) < dnsmsg.HeaderLen {
		return nil // not even a header to answer to
	}
	client := netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
	var pending Pending
	if r.fast != nil {
		// Answered here when no resolver is needed: no handoff.
		*r.req = Request{Raw: raw, Proto: "udp", Client: client, Answer: out[:0]}
		if answer, handled := s.handleFast(r.fast, r.req); handled {
			return answer
		}
		pending = r.req.Pending
	}
	count, ok := s.admit(client.Addr())
	if !ok {
		if pending != nil {
			pending.Abandon()
		}
		return s.refuse(raw, "udp", client)
	}
	q := getClientQuery(len(raw), "udp", client)
	copy(q.buf, raw)
	q.req.Pending, q.count = pending, count
	if q.out == nil {
		q.out = make([]byte, 0, clientAnswerBufLen)
	}
	q.req.Answer = q.out[:0]
	// Field by field, not a literal: a literal is built on the stack and
	// copied from there in loads that wait for its narrower stores.
	u := &q.udp
	u.pc, u.rc, u.v6, u.to, u.local, u.ifindex = r.pc, r.rc, r.v6, from, local, ifindex
	select {
	case s.udpWork <- q:
	default:
		// No worker is idle. The Add is safe against Shutdown's Wait
		// because this reader is itself counted, so the counter is
		// never zero here.
		s.wg.Add(1)
		go s.udpWorker(q)
	}
	return nil
}

// udpWorkerIdle is the UDP worker reaper's period: workers beyond the most
// queries that were in flight at once during a whole period end. Long-lived
// workers keep their grown stacks and spare a goroutine start per query
// (measured: about a tenth of the CPU of a forwarded query); the reaper
// returns the memory after a burst.
const udpWorkerIdle = 10 * time.Second

// udpReturn is where a UDP query's answer goes back: the socket it came
// in on and its sender. It travels to a worker in the query's
// clientQuery, which goes over udpWork as a pointer: a channel copies its
// element on every handoff, and the handoff is on every forwarded query's
// path. A nil query asks the idle worker that takes it to end.
type udpReturn struct {
	pc      *net.UDPConn
	rc      syscall.RawConn // pc's, or nil (see udpSender)
	v6      bool            // pc is an IPv6 socket
	to      netip.AddrPort
	local   netip.Addr // the address the client asked, on a wildcard socket; else invalid
	ifindex int32      // the interface it came in on, with local
}

// udpWorker serves job, then every job handed to it, until the reaper asks
// it to end or Shutdown closes udpWork. Its wait is one channel receive:
// a timer in a blocking select is added to and taken off the runtime's
// timer heap, under its lock, each time the worker parks (once per query
// under load), and a select locks every channel in it.
func (s *Server) udpWorker(q *clientQuery) {
	defer s.wg.Done()
	s.workers.Add(1)
	defer s.workers.Add(-1)
	w := newUDPSender()
	for {
		s.serveUDP(q, w)
		q = <-s.udpWork
		if q == nil {
			return // asked to end, or udpWork closed
		}
	}
}

// reapUDPWorkers ends, once every udpWorkerIdle, the idle UDP workers
// beyond the most queries in flight at once during the period, until
// Shutdown begins.
func (s *Server) reapUDPWorkers() {
	every := s.reapEvery
	if every <= 0 {
		every = udpWorkerIdle
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-tick.C:
		}
		needed := s.peak.Swap(s.adm.inflight.Load())
		for extra := s.workers.Load() - needed; extra > 0; extra-- {
			select {
			case s.udpWork <- nil:
			default:
				extra = 0 // no worker is idle
			}
		}
		if s.reaped != nil {
			s.reaped()
		}
	}
}

// serveUDP answers one admitted query and returns its permit.
func (s *Server) serveUDP(q *clientQuery, w *udpSender) {
	defer s.release(q.count) // evaluated now: putClientQuery clears it
	defer putClientQuery(q)
	answer := s.handle(&q.req)
	if answer == nil {
		return
	}
	u := &q.udp
	if u.rc != nil {
		if sent, err := w.send(u.rc, u.v6, answer, u.to, u.local, u.ifindex); sent {
			if err != nil {
				s.log.Debug("writing udp answer", zap.Stringer("client", u.to), zap.Error(err))
			}
			return
		}
	}
	writeUDP(u.pc, answer, u.to, u.local, u.ifindex, s.log)
}

// writeUDP sends answer b to the client at to, from local (on interface
// ifindex) when it is valid: the address the client asked on a wildcard
// socket. A failure is logged to log.
func writeUDP(pc *net.UDPConn, b []byte, to netip.AddrPort, local netip.Addr, ifindex int32, log *zap.Logger) {
	var err error
	if local.IsValid() {
		var oob [64]byte
		_, _, err = pc.WriteMsgUDPAddrPort(b, sourceOOB(oob[:], local, ifindex), to)
	} else {
		_, err = pc.WriteToUDPAddrPort(b, to)
	}
	if err != nil {
		log.Debug("writing udp answer", zap.Stringer("client", to), zap.Error(err))
	}
}
