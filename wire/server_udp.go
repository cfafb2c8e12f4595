package wire

import (
	"errors"
	"net"
	"net/netip"

	"go.uber.org/zap"
)

// udpReadBufLen is the size of a reader's buffer: the largest UDP payload, so
// that no datagram is silently cut short.
const udpReadBufLen = 65535

// readUDP is one of the reader loops of pc. It ends when Shutdown pushes
// pc's read deadline into the past.
//
// Each admitted query is copied into a pooled buffer and served on its own
// goroutine; a query past the concurrency limit is refused from this loop,
// so the number of goroutines never exceeds readers + MaxConcurrentQueries
// however fast datagrams arrive.
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
		// Not wg.Go: its extra closure is an allocation per query. The
		// Add is safe against Shutdown's Wait because this reader is
		// itself counted, so the counter is never zero here.
		s.wg.Add(1)
		go s.serveUDP(pc, q, from)
	}
}

// serveUDP answers one admitted query and returns its permit.
func (s *Server) serveUDP(pc *net.UDPConn, q *clientQuery, to netip.AddrPort) {
	defer s.wg.Done()
	defer s.release()
	defer putClientQuery(q)
	if answer := s.handle(&q.req); answer != nil {
		s.writeUDP(pc, answer, to)
	}
}

func (s *Server) writeUDP(pc *net.UDPConn, b []byte, to netip.AddrPort) {
	if _, err := pc.WriteToUDPAddrPort(b, to); err != nil {
		s.log.Debug("writing udp answer", zap.Stringer("client", to), zap.Error(err))
	}
}
