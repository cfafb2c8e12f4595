package server

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/nxdnsd/nxdnsd/wire/dnsmsg"
)

// DoH over HTTP/2 is served here, not by net/http: a DoH request is one
// HEADERS frame, at most a little DATA, and one small answer, and
// net/http's general server spends about twice dnsdist's CPU on it
// (a goroutine per request, its serve loop's channels, a goroutine per
// flush). One loop per connection reads frames; what needs no resolver
// is answered on it, the rest on a goroutine each; answers are written
// under the connection's write lock and flushed when the loop has no
// frame left to read, so that a burst of requests is answered with one
// write. HTTP/1.1 connections go to net/http (startHTTPS).

// h2MaxStreams is the SETTINGS_MAX_CONCURRENT_STREAMS nxdnsd announces: as
// many queries in flight on one connection as a TCP one may have.
const h2MaxStreams = DefaultMaxQueriesPerConnection

// h2Window is the flow-control window nxdnsd grants a connection and each
// stream to send it (the protocol's initial 65,535): a query fits whole.
const h2Window = 65535

// h2MaxFrame is the largest frame a client may send: the protocol's
// initial SETTINGS_MAX_FRAME_SIZE, which nxdnsd does not raise.
const h2MaxFrame = 16384

// h2Conn is one DoH connection over HTTP/2.
type h2Conn struct {
	s      *Server
	conn   net.Conn // a *tls.Conn; an in-memory one in FuzzServeH2
	client netip.AddrPort
	br     *bufio.Reader
	fr     *http2.Framer

	// Owned by the read loop.
	bodies  map[uint32]*h2Body // POST requests whose body is being read
	lastID  uint32             // the highest stream the client opened
	queries sync.WaitGroup     // queries being answered off the loop

	wmu        sync.Mutex // guards following, and every write to fr and bw
	bw         *bufio.Writer
	henc       *hpack.Encoder
	hbuf       bytes.Buffer
	broken     bool             // a write failed: nothing more is written
	goneAway   bool             // the loop sent GOAWAY with an error: serveH2 sends no other
	sendConn   int64            // the connection's send window
	sendInit   int64            // the client's SETTINGS_INITIAL_WINDOW_SIZE
	sendStream map[uint32]int64 // the send window of each stream being answered
	maxFrame   int              // the client's SETTINGS_MAX_FRAME_SIZE
	pending    []*h2Answer      // answers waiting for flow-control window, in order
	inFlight   int              // requests being answered, for MAX_CONCURRENT_STREAMS
}

// h2Body is a POST request's body being read.
type h2Body struct {
	name     string
	data     []byte
	tooLarge bool
}

// h2Answer is an answer not yet written whole.
type h2Answer struct {
	stream      uint32
	headersSent bool
	data        []byte // what is left to send; owned
}

// serveH2 serves conn, whose handshake chose h2, until the client goes,
// idles, errs or Shutdown; it waits for the answers in flight before it
// closes conn.
func (s *Server) serveH2(conn net.Conn, client netip.AddrPort) {
	c := &h2Conn{
		s: s, conn: conn, client: client,
		br:         bufio.NewReaderSize(conn, 16<<10),
		bodies:     make(map[uint32]*h2Body),
		sendConn:   h2Window,
		sendInit:   h2Window,
		sendStream: make(map[uint32]int64),
		maxFrame:   16384,
	}
	c.bw = bufio.NewWriterSize(conn, 16<<10)
	c.fr = http2.NewFramer(c.bw, c.br)
	// The framer reads up to 16 MiB by default, allocating what a
	// frame's header announces before its payload comes; the client
	// may send no more than the SETTINGS_MAX_FRAME_SIZE nxdnsd leaves
	// at its initial value.
	c.fr.SetMaxReadFrameSize(h2MaxFrame)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.fr.MaxHeaderListSize = maxHeaderBytes
	c.henc = hpack.NewEncoder(&c.hbuf)
	c.serve()
	c.queries.Wait()
	c.wmu.Lock()
	if !c.broken {
		if !c.goneAway {
			_ = c.fr.WriteGoAway(c.lastID, http2.ErrCodeNo, nil)
		}
		_ = c.bw.Flush()
	}
	c.wmu.Unlock()
	conn.Close()
}

// serve is the connection's read loop.
func (c *h2Conn) serve() {
	s := c.s
	if !c.deadline() {
		return
	}
	var preface [len(http2.ClientPreface)]byte
	if _, err := io.ReadFull(c.br, preface[:]); err != nil || string(preface[:]) != http2.ClientPreface {
		return
	}
	c.wmu.Lock()
	err := c.fr.WriteSettings(
		http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: h2MaxStreams},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: maxHeaderBytes},
	)
	if err == nil {
		err = c.bw.Flush()
	}
	c.wmu.Unlock()
	if err != nil {
		return
	}
	for {
		if !c.deadline() {
			return
		}
		f, err := c.fr.ReadFrame()
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				c.write(func() error { return c.fr.WriteRSTStream(se.StreamID, se.Code) })
				continue
			}
			var ce http2.ConnectionError
			if errors.As(err, &ce) {
				c.goAway(http2.ErrCode(ce))
			} else if errors.Is(err, http2.ErrFrameTooLarge) {
				c.goAway(http2.ErrCodeFrameSize)
			}
			s.log.Debug("https: reading an http/2 frame", zap.Stringer("client", c.client), zap.Error(err))
			return
		}
		if !c.frame(f) {
			return
		}
		// Answers made on the loop go out together once no frame
		// waits to be read.
		if c.br.Buffered() == 0 {
			c.flush()
		}
	}
}

// deadline bounds the next frame's read by the idle timeout, and reports
// false when Shutdown has begun (the same handshake as clientConn.readOne).
func (c *h2Conn) deadline() bool {
	if err := c.conn.SetReadDeadline(time.Now().Add(c.s.idle)); err != nil {
		return false
	}
	return !c.s.closing.Load()
}

// frame handles one frame; false ends the connection.
func (c *h2Conn) frame(f http2.Frame) bool {
	switch f := f.(type) {
	case *http2.MetaHeadersFrame:
		return c.headers(f)
	case *http2.DataFrame:
		return c.data(f)
	case *http2.SettingsFrame:
		if f.IsAck() {
			return true
		}
		c.wmu.Lock()
		err := f.ForeachSetting(func(st http2.Setting) error {
			// Out of range (RFC 9113 6.5.2): a MAX_FRAME_SIZE under
			// 16,384 would leave every answer's DATA unsent.
			if err := st.Valid(); err != nil {
				return err
			}
			switch st.ID {
			case http2.SettingInitialWindowSize:
				delta := int64(st.Val) - c.sendInit
				c.sendInit = int64(st.Val)
				for id := range c.sendStream {
					c.sendStream[id] += delta
				}
			case http2.SettingMaxFrameSize:
				c.maxFrame = int(st.Val)
			case http2.SettingHeaderTableSize:
				// The client's decoder keeps no larger a table
				// (0: none); the encoder says so in the next block.
				c.henc.SetMaxDynamicTableSizeLimit(st.Val)
			}
			return nil
		})
		var ce http2.ConnectionError
		if errors.As(err, &ce) {
			c.wmu.Unlock()
			c.goAway(http2.ErrCode(ce))
			return false
		}
		if err == nil {
			err = c.fr.WriteSettingsAck()
		}
		c.pumpLocked()
		c.wmu.Unlock()
		return err == nil
	case *http2.WindowUpdateFrame:
		c.wmu.Lock()
		if f.StreamID == 0 {
			c.sendConn += int64(f.Increment)
		} else if _, ok := c.sendStream[f.StreamID]; ok {
			c.sendStream[f.StreamID] += int64(f.Increment)
		}
		c.pumpLocked()
		c.wmu.Unlock()
		return true
	case *http2.PingFrame:
		if !f.IsAck() {
			c.write(func() error { return c.fr.WritePing(true, f.Data) })
		}
		return true
	case *http2.RSTStreamFrame:
		delete(c.bodies, f.StreamID)
		c.wmu.Lock()
		c.dropLocked(f.StreamID)
		c.wmu.Unlock()
		return true
	case *http2.GoAwayFrame:
		return false
	default:
		return true // PRIORITY, unknown frames: nothing to do
	}
}

// headers starts a request.
func (c *h2Conn) headers(f *http2.MetaHeadersFrame) bool {
	id := f.StreamID
	if id <= c.lastID || id%2 == 0 {
		c.goAway(http2.ErrCodeProtocol)
		return false
	}
	c.lastID = id
	c.wmu.Lock()
	full := c.inFlight >= h2MaxStreams
	if !full {
		c.inFlight++
		c.sendStream[id] = c.sendInit
	}
	c.wmu.Unlock()
	if full {
		c.write(func() error { return c.fr.WriteRSTStream(id, http2.ErrCodeRefusedStream) })
		return true
	}
	path, rawQuery, _ := strings.Cut(f.PseudoValue("path"), "?")
	name, ok := dohClientName(path)
	if !ok {
		c.status(id, http.StatusNotFound)
		return true
	}
	switch f.PseudoValue("method") {
	case http.MethodGet:
		if !f.StreamEnded() {
			c.status(id, http.StatusBadRequest) // a GET carries no body
			return true
		}
		v, ok := dnsParam(rawQuery)
		if !ok {
			c.status(id, http.StatusBadRequest)
			return true
		}
		v = strings.TrimRight(v, "=")
		n := base64.RawURLEncoding.DecodedLen(len(v))
		if n > maxDNSMessage {
			c.status(id, http.StatusRequestEntityTooLarge)
			return true
		}
		q := getClientQuery(n, ProtoHTTPS, c.client)
		if cap(q.buf) < n {
			q.buf = make([]byte, n)
		}
		n, err := base64.RawURLEncoding.Decode(q.buf[:n], []byte(v))
		if err != nil {
			putClientQuery(q)
			c.status(id, http.StatusBadRequest)
			return true
		}
		c.query(id, q, q.buf[:n], name)
	case http.MethodPost:
		var ct string
		for _, hf := range f.RegularFields() {
			if hf.Name == "content-type" {
				ct = hf.Value
			}
		}
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != dnsMessage {
			c.status(id, http.StatusUnsupportedMediaType)
			return true
		}
		if f.StreamEnded() {
			c.status(id, http.StatusBadRequest) // no body
			return true
		}
		c.bodies[id] = &h2Body{name: name}
	default:
		c.status(id, http.StatusMethodNotAllowed)
	}
	return true
}

// data reads part of a POST body, and answers the request at its end.
func (c *h2Conn) data(f *http2.DataFrame) bool {
	// Every byte read is given back to the connection's window at once;
	// the stream's, while its body is still wanted.
	if n := f.Length; n > 0 {
		c.write(func() error { return c.fr.WriteWindowUpdate(0, n) })
	}
	b, ok := c.bodies[f.StreamID]
	if !ok {
		return true // a stream answered already (413) or reset
	}
	if len(b.data)+len(f.Data()) > maxDNSMessage {
		b.tooLarge = true
	} else {
		b.data = append(b.data, f.Data()...)
	}
	if !f.StreamEnded() {
		if n := f.Length; n > 0 && !b.tooLarge {
			c.write(func() error { return c.fr.WriteWindowUpdate(f.StreamID, n) })
		}
		return true
	}
	delete(c.bodies, f.StreamID)
	if b.tooLarge {
		c.status(f.StreamID, http.StatusRequestEntityTooLarge)
		return true
	}
	q := getClientQuery(len(b.data), ProtoHTTPS, c.client)
	if cap(q.buf) < len(b.data) {
		q.buf = make([]byte, len(b.data))
	}
	n := copy(q.buf, b.data)
	c.query(f.StreamID, q, q.buf[:n], b.name)
	return true
}

// query answers the DNS query raw (in q's memory) of stream id: on the
// loop when the FastHandler can, else on a goroutine of its own, admitted
// as a TCP query is.
func (c *h2Conn) query(id uint32, q *clientQuery, raw []byte, name string) {
	s := c.s
	if len(raw) < dnsmsg.HeaderLen {
		putClientQuery(q)
		c.status(id, http.StatusBadRequest)
		return
	}
	q.req.Raw, q.req.ClientName = raw, name
	if q.out == nil {
		q.out = make([]byte, 0, clientAnswerBufLen)
	}
	q.req.Answer = q.out[:0]
	fh, fast := s.Handler.(FastHandler)
	if fast {
		if answer, handled := s.handleFast(fh, &q.req); handled {
			c.answer(id, answer, false)
			putClientQuery(q)
			return
		}
	}
	count, ok := s.admit(q.req.Client.Addr())
	if !ok {
		if p := q.req.Pending; p != nil {
			q.req.Pending = nil
			p.Abandon() // what ServeFast kept for it
		}
		c.answer(id, s.refuse(q.req.Raw, ProtoHTTPS, q.req.Client), false)
		putClientQuery(q)
		return
	}
	q.count = count
	c.queries.Add(1)
	s.wg.Go(func() {
		defer c.queries.Done()
		defer s.release(count)
		defer putClientQuery(q)
		c.answer(id, s.handle(&q.req), true)
	})
}

// answer writes the DoH response to stream id: 200 and answer, or 400
// when there is none; flush says whether to flush now (off the loop).
func (c *h2Conn) answer(id uint32, answer []byte, flush bool) {
	if answer == nil {
		c.status(id, http.StatusBadRequest)
		if flush {
			c.flush()
		}
		return
	}
	c.respond(id, http.StatusOK, dnsMessage, CacheMaxAge(answer), answer)
	if flush {
		c.flush()
	}
}

// status answers stream id with an error status and its text.
func (c *h2Conn) status(id uint32, code int) {
	c.respond(id, code, "text/plain; charset=utf-8", 0, []byte(http.StatusText(code)+"\n"))
}

// respond writes a response's headers and as much of body as the flow
// control windows allow; the rest is sent as the client opens them.
func (c *h2Conn) respond(id uint32, code int, contentType string, maxAge uint32, body []byte) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.broken {
		return
	}
	if _, open := c.sendStream[id]; !open {
		return // reset by the client meanwhile
	}
	// Before the first write: the buffer may fill and write through.
	if err := c.conn.SetWriteDeadline(time.Now().Add(c.s.idle)); err != nil {
		c.failLocked(err)
		return
	}
	c.hbuf.Reset()
	var num [20]byte
	enc := c.henc
	_ = enc.WriteField(hpack.HeaderField{Name: ":status", Value: strconv.Itoa(code)})
	_ = enc.WriteField(hpack.HeaderField{Name: "content-type", Value: contentType})
	_ = enc.WriteField(hpack.HeaderField{Name: "content-length", Value: string(strconv.AppendInt(num[:0], int64(len(body)), 10))})
	if code == http.StatusOK {
		_ = enc.WriteField(hpack.HeaderField{Name: "cache-control", Value: "max-age=" + strconv.FormatUint(uint64(maxAge), 10)})
	}
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.hbuf.Bytes(), EndHeaders: true}); err != nil {
		c.failLocked(err)
		return
	}
	a := &h2Answer{stream: id, headersSent: true, data: body}
	if !c.sendLocked(a) {
		a.data = bytes.Clone(a.data) // the caller's memory is reused
		c.pending = append(c.pending, a)
	}
}

// sendLocked sends what the windows allow of a's data and reports whether
// it is all sent (the stream then ends).
func (c *h2Conn) sendLocked(a *h2Answer) bool {
	for {
		n := int64(len(a.data))
		n = min(n, c.sendConn, c.sendStream[a.stream], int64(c.maxFrame))
		if n <= 0 && len(a.data) > 0 {
			return false
		}
		last := int(n) == len(a.data)
		if err := c.fr.WriteData(a.stream, last, a.data[:n]); err != nil {
			c.failLocked(err)
			return true
		}
		c.sendConn -= n
		c.sendStream[a.stream] -= n
		a.data = a.data[n:]
		if last {
			c.dropLocked(a.stream)
			return true
		}
	}
}

// pumpLocked sends what newly opened windows allow of the answers waiting.
func (c *h2Conn) pumpLocked() {
	kept := c.pending[:0]
	for _, a := range c.pending {
		if _, open := c.sendStream[a.stream]; !open {
			continue
		}
		if !c.sendLocked(a) {
			kept = append(kept, a)
		}
	}
	clear(c.pending[len(kept):])
	c.pending = kept
}

// dropLocked ends stream id on nxdnsd's side.
func (c *h2Conn) dropLocked(id uint32) {
	if _, ok := c.sendStream[id]; ok {
		delete(c.sendStream, id)
		c.inFlight--
	}
}

// goAway sends GOAWAY with code, an error's, as the loop's last frame:
// the client then reads that code, not the NO_ERROR of serveH2's close.
func (c *h2Conn) goAway(code http2.ErrCode) {
	c.write(func() error {
		c.goneAway = true
		return c.fr.WriteGoAway(c.lastID, code, nil)
	})
}

// write runs one frame write under the lock.
func (c *h2Conn) write(w func() error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.broken {
		return
	}
	err := c.conn.SetWriteDeadline(time.Now().Add(c.s.idle))
	if err == nil {
		err = w()
	}
	if err != nil {
		c.failLocked(err)
	}
}

// flush writes out what is buffered, bounded by the idle timeout.
func (c *h2Conn) flush() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.broken || c.bw.Buffered() == 0 {
		return
	}
	err := c.conn.SetWriteDeadline(time.Now().Add(c.s.idle))
	if err == nil && c.s.aborted.Load() {
		err = errAnswerAborted
	}
	if err == nil {
		err = c.bw.Flush()
	}
	if err != nil {
		c.failLocked(err)
	}
}

// failLocked marks the connection broken after a failed write and closes
// it: the read loop then ends.
func (c *h2Conn) failLocked(err error) {
	c.s.log.Debug("https: writing http/2", zap.Stringer("client", c.client), zap.Error(err))
	c.broken = true
	c.conn.Close()
}

// acceptHTTPS is a DoH socket's accept loop: each connection's handshake
// is made on a goroutine of its own, which then serves HTTP/2 itself or
// hands an HTTP/1.1 connection to net/http (h1). It ends when Shutdown
// closes the socket.
func (s *Server) acceptHTTPS(l *countingListener, conf *tls.Config, h1 *connListener) {
	acceptEach(s, "accepting https", l.Accept, func(c net.Conn) {
		s.wg.Go(func() { s.serveHTTPSConn(tls.Server(c, conf), h1) })
	})
}

// serveHTTPSConn makes c's handshake, bounded by the idle timeout, and
// serves it over HTTP/2 or hands it to net/http for HTTP/1.1. Until it is
// handed on, Shutdown sees it (trackTLS).
func (s *Server) serveHTTPSConn(c *tls.Conn, h1 *connListener) {
	if !s.trackTLS(c, true) {
		c.Close()
		return
	}
	defer s.trackTLS(c, false)
	if err := c.SetDeadline(time.Now().Add(s.idle)); err != nil || s.closing.Load() {
		c.Close()
		return
	}
	if err := c.Handshake(); err != nil {
		s.log.Debug("https: tls handshake", zap.Stringer("client", c.RemoteAddr()), zap.Error(err))
		c.Close()
		return
	}
	_ = c.SetDeadline(time.Time{})
	ap := c.RemoteAddr().(*net.TCPAddr).AddrPort()
	client := netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	if c.ConnectionState().NegotiatedProtocol == "h2" {
		s.serveH2(c, client)
		return
	}
	select {
	case h1.conns <- c:
	case <-h1.done:
		c.Close()
	}
}

// trackTLS registers (add) or forgets a DoH connection that net/http does
// not serve, for Shutdown; it reports false when Shutdown has begun.
func (s *Server) trackTLS(c *tls.Conn, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !add {
		delete(s.tlsConns, c)
		return true
	}
	if s.closing.Load() {
		return false
	}
	if s.tlsConns == nil {
		s.tlsConns = make(map[*tls.Conn]struct{})
	}
	s.tlsConns[c] = struct{}{}
	return true
}

// expireTLSConns puts the read deadline of the connections trackTLS holds
// in the past, and with writes too their write deadline: what blocks on
// them returns at once. The deadlines are set after the lock is released.
func (s *Server) expireTLSConns(writes bool) {
	s.mu.Lock()
	conns := make([]*tls.Conn, 0, len(s.tlsConns))
	for c := range s.tlsConns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		if writes {
			c.SetDeadline(aLongTimeAgo)
		} else {
			c.SetReadDeadline(aLongTimeAgo)
		}
	}
}

// connListener is the net.Listener net/http serves the HTTP/1.1
// connections on: acceptHTTPS hands them over, their handshake made.
type connListener struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newConnListener(addr net.Addr) *connListener {
	return &connListener{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}
}

// Accept implements net.Listener.
func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener.
func (l *connListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr implements net.Listener.
func (l *connListener) Addr() net.Addr { return l.addr }
