package fake

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// streamReadBuf is the read buffer of one TCP or DoT client.
	streamReadBuf = 16 << 10

	// maxStreamBacklog bounds the answers waiting for one client's writer:
	// a client that stops reading is closed past it rather than buffered
	// for without end.
	maxStreamBacklog = 1 << 20
)

// errStreamClosed is a reply to a client whose connection is closing.
var errStreamClosed = errors.New("fake: connection closing")

// streamConn is one TCP or DNS-over-TLS client, served by two goroutines:
// a reader that answers its queries as they come, pipelined or not, and a
// writer that sends the answers. Answers queue in out until the writer
// takes all of them at once, so that while it is in one write the next
// answers gather for the next: pipelined queries get their answers in a
// few large writes (TLS records), one each only when they come one at a
// time. Delay mode's answers join the same queue.
type streamConn struct {
	raw  *net.TCPConn // closed to end the connection, whatever a TLS write holds
	conn net.Conn     // raw, or a *tls.Conn over it

	wake chan struct{} // capacity 1: out has answers for the writer
	done chan struct{} // closed when the reader ends: the writer ends too

	mu      sync.Mutex // guards following
	out     []byte     // framed answers the writer has not taken yet
	closing bool       // a write failed or the reader ended: no more answers
}

func newStreamConn(raw *net.TCPConn, conf *tls.Config) *streamConn {
	c := &streamConn{raw: raw, conn: raw, wake: make(chan struct{}, 1), done: make(chan struct{})}
	if conf != nil {
		c.conn = tls.Server(raw, conf) // handshakes on the reader's first read
	}
	return c
}

// reply queues one answer, behind its length, for the writer.
func (c *streamConn) reply(b []byte) error {
	c.mu.Lock()
	if c.closing || len(c.out)+2+len(b) > maxStreamBacklog {
		c.closing = true
		c.mu.Unlock()
		return errStreamClosed
	}
	c.out = binary.BigEndian.AppendUint16(c.out, uint16(len(b)))
	c.out = append(c.out, b...)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default: // the writer is already due to look
	}
	return nil
}

// Close ends the connection: closing the TCP socket unblocks a read or a
// write in progress, which closing a tls.Conn (its close_notify waits for
// a blocked write) would not.
func (c *streamConn) Close() error { return c.raw.Close() }

// acceptStream accepts clients on l until it closes, each served by a
// reader and a writer goroutine, over TLS with conf when conf is not nil;
// past maxTCPConns (TCP and DoT together) a client is closed at once.
// accepted counts them.
func (s *Server) acceptStream(l *net.TCPListener, conf *tls.Config, accepted *atomic.Uint64) {
	defer s.wg.Done()
	for {
		nc, err := l.AcceptTCP()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // a client that gave up before we accepted it
		}
		c := newStreamConn(nc, conf)
		s.mu.Lock()
		ok := !s.closed && len(s.conns) < maxTCPConns
		if ok {
			s.conns[c] = struct{}{}
			s.wg.Add(2)
		}
		s.mu.Unlock()
		if !ok {
			_ = nc.Close()
			continue
		}
		accepted.Add(1)
		go s.readStream(c)
		go s.writeStream(c)
	}
}

// readStream answers the length-prefixed queries of one client, pipelined
// or not, until it closes, idles past tcpIdleTimeout, fails its TLS
// handshake, stops reading its answers or the server closes.
func (s *Server) readStream(c *streamConn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.mu.Lock()
		c.closing = true
		c.mu.Unlock()
		close(c.done)
		_ = c.Close()
	}()
	r := bufio.NewReaderSize(c.conn, streamReadBuf)
	buf := make([]byte, maxMsgLen+Headroom)
	var l [2]byte
	for {
		if r.Buffered() < len(l) {
			_ = c.conn.SetReadDeadline(time.Now().Add(tcpIdleTimeout)) // fails only once closed; the read says so
		}
		if _, err := io.ReadFull(r, l[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint16(l[:]))
		if r.Buffered() < n {
			_ = c.conn.SetReadDeadline(time.Now().Add(tcpIdleTimeout))
		}
		if _, err := io.ReadFull(r, buf[:n]); err != nil {
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

// writeStream sends the answers queued for one client, all that are
// queued in each write, until the reader ends or a write fails, which
// closes the connection.
func (s *Server) writeStream(c *streamConn) {
	defer s.wg.Done()
	var batch []byte
	for {
		select {
		case <-c.wake:
		case <-c.done:
			return
		}
		c.mu.Lock()
		batch, c.out = c.out, batch[:0]
		c.mu.Unlock()
		if len(batch) == 0 {
			continue
		}
		if _, err := c.conn.Write(batch); err != nil {
			c.mu.Lock()
			c.closing = true
			c.mu.Unlock()
			_ = c.Close() // the reader's read fails and it ends
			return
		}
	}
}
