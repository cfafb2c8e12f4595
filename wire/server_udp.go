package wire

import (
	"errors"
	"net"
	"net/netip"
	"time"

	"go.uber.org/zap"
)

// udpReadBufLen is the size of a reader's buffer: the largest UDP payload, so
// that no datagram is silently cut short.
const udpReadBufLen = 65535

// readUDP is pc's reader loop. It ends when Shutdown pushes pc's read
// deadline into the past.
//
// Each admitted query is copied into a pooled buffer and handed to an idle
// worker, or to a new one when none is idle; a query past the concurrency
// limit is refused from this loop. Busy workers never outnumber admitted
// queries, so the number of goroutines stays below the readers +
// MaxConcurrentQueries (plus workers idling out) however fast datagrams
// arrive.
func (s *Server) readUDP(pc *net.UDPConn) {
	buf := make([]byte, udpReadBufLen)
	for {
		n, from, err := pc.ReadFromUDPAddrPort(buf)
		if err != nil {
			if s.closing.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			// Nothing else is fatal to an unconnected socket; whatever
			// it was concerned one datagram.
			s.log.Debug("reading udp", zap.Error(err))
			continue
		}
		if n < headerLen {
			continue // not even a header to answer to
		}
		if !s.admit() {
			if refused := s.refuse(buf[:n]); refused != nil {
				s.writeUDP(pc, refused, from)
			}
			continue
		}
		client := netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
		q := getClientQuery(n, "udp", client)
		copy(q.buf, buf[:n])
		if q.out == nil {
			q.out = make([]byte, 0, clientAnswerBufLen)
		}
		q.req.Answer = q.out[:0]
		job := udpJob{pc: pc, q: q, to: from}
		select {
		case s.udpWork <- job:
		default:
			// No worker is idle. The Add is safe against Shutdown's Wait
			// because this reader is itself counted, so the counter is
			// never zero here.
			s.wg.Add(1)
			go s.udpWorker(job)
		}
	}
}

// udpWorkerIdle is how long a UDP worker waits for another query before it
// may end. Long-lived workers keep their grown stacks and spare a goroutine
// start per query (measured: about a tenth of the CPU of a forwarded
// query); the idle limit returns the memory after a burst.
const udpWorkerIdle = 10 * time.Second

// udpJob is one admitted datagram on its way to a worker.
type udpJob struct {
	pc *net.UDPConn
	q  *clientQuery
	to netip.AddrPort
}

// udpWorker serves job, then every job handed to it, until it has served
// nothing for a whole udpWorkerIdle period (so it idles out after one to two
// periods) or Shutdown begins. The timer ticks once a period rather than
// being reset after every job: a reset per query took the runtime's timer
// lock on the hot path.
func (s *Server) udpWorker(job udpJob) {
	defer s.wg.Done()
	idle := time.NewTicker(udpWorkerIdle)
	defer idle.Stop()
	s.serveUDP(job)
	busy := true
	for {
		select {
		case job = <-s.udpWork:
			s.serveUDP(job)
			busy = true
		case <-idle.C:
			if !busy {
				return
			}
			busy = false
		case <-s.done:
			return
		}
	}
}

// serveUDP answers one admitted query and returns its permit.
func (s *Server) serveUDP(job udpJob) {
	defer s.release()
	defer putClientQuery(job.q)
	if answer := s.handle(&job.q.req); answer != nil {
		s.writeUDP(job.pc, answer, job.to)
	}
}

func (s *Server) writeUDP(pc *net.UDPConn, b []byte, to netip.AddrPort) {
	if _, err := pc.WriteToUDPAddrPort(b, to); err != nil {
		s.log.Debug("writing udp answer", zap.Stringer("client", to), zap.Error(err))
	}
}
