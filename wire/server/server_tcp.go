package server

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/nxdnsd/nxdnsd/wire/dnsmsg"
)

// maxPooledWriteBuf bounds the write buffer a connection keeps between
// answers, so that one large answer does not pin 64 KiB per idle client.
const maxPooledWriteBuf = 4096

// acceptTCP is l's accept loop, for connections of proto ("tcp", or "tls"
// for DNS over TLS). It ends when Shutdown closes l.
func (s *Server) acceptTCP(l *net.TCPListener, proto string) {
	acceptEach(s, "accepting tcp", l.AcceptTCP, func(c *net.TCPConn) { s.startConn(c, proto) })
}

// startConn registers c, a connection of proto ("tcp" or "tls"), and
// starts serving it, or closes it at once when MaxTCPConnections are
// open, MaxClientTCPConnections of its client's, or Shutdown has begun.
func (s *Server) startConn(c *net.TCPConn, proto string) {
	ap := c.RemoteAddr().(*net.TCPAddr).AddrPort()
	tc := &clientConn{
		s:      s,
		conn:   s.wrapConn(c, proto),
		proto:  proto,
		client: netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()),
		slots:  make(connSlots, s.maxConnQueries),
	}
	ip := tc.client.Addr()
	// Registration and Shutdown's snapshot are both under mu, so a
	// connection is either seen by Shutdown or sees closing here.
	s.mu.Lock()
	if s.closing.Load() || !s.adm.takeConn(ip, s.maxTCP, s.maxClientTCP) {
		s.mu.Unlock()
		c.Close()
		if s.accepted != nil {
			s.accepted(ip, false)
		}
		return
	}
	s.conns[tc] = struct{}{}
	s.mu.Unlock()
	if s.accepted != nil {
		s.accepted(ip, true)
	}
	s.wg.Go(tc.serve)
}

// clientConn is one client TCP connection. Its read loop (serve) reads
// queries one after another and serves each on its own goroutine, so
// pipelined queries are answered concurrently and possibly out of order
// (RFC 7766, section 6.2.1.1).
type clientConn struct {
	s      *Server
	conn   net.Conn // a *net.TCPConn, or a *tls.Conn over one
	proto  string   // "tcp" or "tls"
	client netip.AddrPort

	inflight sync.WaitGroup // queries of this connection being served
	slots    connSlots      // a token per query being served, MaxQueriesPerConnection at most

	wmu    sync.Mutex // guards following; serialises answers, each must go out whole
	wbuf   []byte     // length prefix and answer, written in one call
	broken bool       // a write failed: the connection is being torn down
}

// serve is the connection's read loop. When reading stops — client gone or
// idle, a zero-length message, Shutdown — it waits for the queries already
// read, so their answers still go out, then closes the connection.
//
// Each query holds one of the connection's slots from before it is read
// until it is answered (or refused): with every slot taken the loop waits
// for one instead of reading, and the client's further queries wait in
// its socket.
func (c *clientConn) serve() {
	s := c.s
	var prefix [2]byte
	ok := c.handshake()
	for ok && c.slots.take(s.done) {
		if !c.readOne(prefix[:]) {
			c.slots.give()
			break
		}
	}
	c.inflight.Wait()
	c.conn.Close()
	ip := c.client.Addr()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.adm.giveConn(ip)
}

// readOne reads one query and has it served, holding a slot of the
// connection's, which it hands on to the query or gives back. It reports
// false when reading is to stop; the slot is then the caller's to give
// back.
func (c *clientConn) readOne(prefix []byte) bool {
	s := c.s
	// The deadline covers a whole message, prefix included: a client
	// trickling bytes or announcing a length it never sends is cut
	// off after the idle timeout, however it paces its bytes.
	if err := c.conn.SetReadDeadline(time.Now().Add(s.idle)); err != nil {
		return false
	}
	// Shutdown raises closing and then sets a deadline in the past.
	// Had it done so just before our SetReadDeadline, we would have
	// overwritten its deadline; reading the flag after setting ours
	// means we either see the flag or Shutdown's deadline comes last.
	if s.closing.Load() {
		return false
	}
	if _, err := io.ReadFull(c.conn, prefix); err != nil {
		return false
	}
	n := int(binary.BigEndian.Uint16(prefix))
	if n == 0 {
		return false // RFC 7766 has no use for it; treat it as a goodbye
	}
	// A length past the pooled size costs its allocation before the
	// bytes arrive; MaxTCPConnections bounds what liars can make us
	// hold (64 KiB each).
	q := getClientQuery(n, c.proto, c.client)
	if _, err := io.ReadFull(c.conn, q.buf[:n]); err != nil {
		putClientQuery(q)
		return false
	}
	if n < dnsmsg.HeaderLen {
		putClientQuery(q) // nothing to answer to, but the framing is intact
		c.slots.give()
		return true
	}
	fh, fast := s.Handler.(FastHandler)
	if fast {
		// What needs no resolver (a cache hit, a name nxdnsd answers
		// itself) is answered here on the read loop, as a UDP reader
		// does: no goroutine is started and handed the query.
		if q.out == nil {
			q.out = make([]byte, 0, clientAnswerBufLen)
		}
		q.req.Answer = q.out[:0]
		if answer, handled := s.handleFast(fh, &q.req); handled {
			if answer != nil {
				c.write(answer)
			}
			putClientQuery(q)
			c.slots.give()
			return true
		}
	}
	count, ok := s.admit(c.client.Addr())
	if !ok {
		if p := q.req.Pending; p != nil {
			q.req.Pending = nil
			p.Abandon() // what ServeFast kept for it
		}
		refused := s.refuse(q.req.Raw, c.proto, c.client)
		putClientQuery(q)
		if refused != nil {
			c.write(refused)
		}
		c.slots.give()
		return true
	}
	q.count = count
	c.inflight.Add(1)
	s.wg.Go(func() { c.serveQuery(q) })
	return true
}

// serveQuery answers one admitted query; the permit and the connection's
// slot are held until the answer is written, so a client that reads slowly
// still counts as load.
func (c *clientConn) serveQuery(q *clientQuery) {
	defer c.inflight.Done()
	defer c.slots.give()
	defer c.s.release(q.count) // evaluated now: putClientQuery clears it
	defer putClientQuery(q)
	if answer := c.s.handle(&q.req); answer != nil {
		c.write(answer)
	}
}

// write sends one answer with its length prefix. A failed write closes the
// connection: the read loop then ends, and later answers are dropped.
func (c *clientConn) write(answer []byte) {
	s := c.s
	if len(answer) > 0xFFFF {
		s.log.Error("answer too long for tcp", zap.Int("len", len(answer)), zap.Stringer("client", c.client))
		return
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.broken {
		return
	}
	c.wbuf = binary.BigEndian.AppendUint16(c.wbuf[:0], uint16(len(answer)))
	c.wbuf = append(c.wbuf, answer...)
	defer func() {
		if cap(c.wbuf) > maxPooledWriteBuf {
			c.wbuf = nil
		}
	}()
	// A client that never reads would otherwise hold this goroutine, and
	// its permit, for good.
	err := c.conn.SetWriteDeadline(time.Now().Add(s.idle))
	// The same handshake as closing in serve: an aborting Shutdown sets
	// its deadline after raising aborted, so either we see the flag here
	// or its deadline overrides ours.
	if err == nil && s.aborted.Load() {
		err = errAnswerAborted
	}
	if err == nil {
		_, err = c.conn.Write(c.wbuf)
	}
	if err != nil {
		s.log.Debug("writing tcp answer", zap.Stringer("client", c.client), zap.Error(err))
		c.broken = true
		c.conn.Close()
	}
}

// errAnswerAborted: Shutdown's context expired before the answer was written.
var errAnswerAborted = errors.New("shutdown aborted the answer")
