package fake

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// tcpConn is one TCP client. Its reader goroutine owns the reads; writes
// come from the reader and from writeDelayed, so they take mu.
type tcpConn struct {
	*net.TCPConn
	mu sync.Mutex // serialises writes
}

func (c *tcpConn) reply(b []byte) error {
	var l [2]byte
	binary.BigEndian.PutUint16(l[:], uint16(len(b)))
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := (&net.Buffers{l[:], b}).WriteTo(c.TCPConn)
	return err
}

// acceptTCP accepts clients until the listener closes, each served on its
// own goroutine; past maxTCPConns a client is closed at once.
func (s *Server) acceptTCP() {
	defer s.wg.Done()
	for {
		nc, err := s.tcp.AcceptTCP()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // a client that gave up before we accepted it
		}
		c := &tcpConn{TCPConn: nc}
		s.mu.Lock()
		ok := !s.closed && len(s.conns) < maxTCPConns
		if ok {
			s.conns[c] = struct{}{}
			s.wg.Add(1)
		}
		s.mu.Unlock()
		if !ok {
			_ = nc.Close()
			continue
		}
		s.tcpConns.Add(1)
		go s.serveTCP(c)
	}
}

// serveTCP answers the length-prefixed queries of one client, pipelined or
// not, until it closes, idles past tcpIdleTimeout or the server closes.
func (s *Server) serveTCP(c *tcpConn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		_ = c.Close()
	}()
	buf := make([]byte, maxMsgLen+Headroom)
	var l [2]byte
	for {
		_ = c.SetReadDeadline(time.Now().Add(tcpIdleTimeout))
		if _, err := io.ReadFull(c, l[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint16(l[:]))
		if _, err := io.ReadFull(c, buf[:n]); err != nil {
			return
		}
		s.queries.Add(1)
		switch mode := s.mode.Load(); mode.Kind {
		case Blackhole:
		case Delay:
			s.hold(buf[:n], mode.Delay, c)
		default:
			if out := s.answer(buf, n, mode.Kind); out != nil {
				if c.reply(out) != nil {
					return
				}
				s.answers.Add(1)
			}
		}
	}
}
