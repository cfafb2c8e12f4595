package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/goleak"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/nxdnsd/nxdnsd/wire/dnsmsg"
)

// memConn is a client connection held in memory: Read returns the
// client's bytes, then io.EOF (the client half-closed); Write keeps what
// the server sends. Deadlines are accepted and ignored: nothing in it
// ever blocks.
type memConn struct {
	r      *bytes.Reader
	mu     sync.Mutex
	out    bytes.Buffer
	closed bool
}

var _ net.Conn = (*memConn)(nil)

func (c *memConn) Read(b []byte) (int, error) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return 0, net.ErrClosed
	}
	return c.r.Read(b)
}

func (c *memConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, net.ErrClosed
	}
	return c.out.Write(b)
}

func (c *memConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return nil
}

func (c *memConn) LocalAddr() net.Addr              { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 443} }
func (c *memConn) RemoteAddr() net.Addr             { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2), Port: 5353} }
func (c *memConn) SetDeadline(time.Time) error      { return nil }
func (c *memConn) SetReadDeadline(time.Time) error  { return nil }
func (c *memConn) SetWriteDeadline(time.Time) error { return nil }

// h2Input builds a client's bytes after the TLS handshake, for the seeds
// and the tests.
type h2Input struct {
	buf bytes.Buffer
	fr  *http2.Framer
}

func newH2Input(preface bool) *h2Input {
	in := &h2Input{}
	if preface {
		in.buf.WriteString(http2.ClientPreface)
	}
	in.fr = http2.NewFramer(&in.buf, nil)
	return in
}

func (in *h2Input) headers(id uint32, end bool, fields ...string) *h2Input {
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for i := 0; i+1 < len(fields); i += 2 {
		enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	in.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block.Bytes(), EndHeaders: true, EndStream: end})
	return in
}

func (in *h2Input) bytes() []byte { return bytes.Clone(in.buf.Bytes()) }

// h2Request is the pseudo-headers of a DoH request.
func h2Request(method, path string, more ...string) []string {
	return append([]string{":method", method, ":scheme", "https", ":authority", "dns.test", ":path", path}, more...)
}

// h2Seeds are FuzzServeH2's seed inputs, each a whole client side of a
// connection.
func h2Seeds(tb testing.TB) [][]byte {
	q := func(id uint16) []byte { return pack(tb, newQuery(id, "example.org.")) }
	post := []string{"content-type", "application/dns-message"}
	var seeds [][]byte
	add := func(in *h2Input) { seeds = append(seeds, in.bytes()) }

	in := newH2Input(true)
	in.fr.WriteSettings()
	add(in.headers(1, true, h2Request("GET", DoHPath+"?dns="+b64(q(1)))...))

	in = newH2Input(true)
	in.fr.WriteSettings(http2.Setting{ID: http2.SettingHeaderTableSize, Val: 0})
	in.headers(1, true, h2Request("GET", DoHPath+"/laptop?ct&dns="+b64(q(2))+"==")...)
	in.headers(3, false, h2Request("POST", DoHPath, post...)...)
	in.fr.WriteData(3, false, q(3)[:5])
	in.fr.WriteData(3, true, q(3)[5:])
	in.fr.WritePing(false, [8]byte{1, 2, 3})
	in.headers(5, true, h2Request("DELETE", DoHPath)...)
	in.headers(7, true, h2Request("GET", "/elsewhere")...)
	add(in)

	// Windows closed, then opened: the answers wait, then go.
	in = newH2Input(true)
	in.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}, http2.Setting{ID: http2.SettingMaxFrameSize, Val: 16384})
	in.headers(1, true, h2Request("GET", DoHPath+"?dns="+b64(q(4)))...)
	in.headers(3, true, h2Request("GET", DoHPath+"?dns="+b64(q(5)))...)
	in.fr.WriteRSTStream(3, http2.ErrCodeCancel)
	in.fr.WriteWindowUpdate(1, 10)
	in.fr.WriteWindowUpdate(0, 100)
	in.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 65535})
	add(in)

	// A POST too large, one of another type, one without a body, a GET
	// with one, padding, PRIORITY, CONTINUATION.
	in = newH2Input(true)
	in.headers(1, false, h2Request("POST", DoHPath, post...)...)
	big := make([]byte, 16000)
	for range 5 {
		in.fr.WriteData(1, false, big)
	}
	in.fr.WriteData(1, true, nil)
	in.headers(3, false, h2Request("POST", DoHPath, "content-type", "text/plain")...)
	in.headers(5, true, h2Request("POST", DoHPath, post...)...)
	in.headers(7, false, h2Request("GET", DoHPath+"?dns="+b64(q(6)))...)
	in.fr.WriteDataPadded(7, true, []byte("x"), make([]byte, 10))
	in.fr.WritePriority(9, http2.PriorityParam{StreamDep: 1, Weight: 15})
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for i, f := range h2Request("GET", DoHPath+"?dns="+b64(q(7))) {
		if i%2 == 1 {
			enc.WriteField(hpack.HeaderField{Name: h2Request("", "")[i-1], Value: f})
		}
	}
	in.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 11, BlockFragment: block.Bytes()[:4], EndStream: true})
	in.fr.WriteContinuation(11, true, block.Bytes()[4:])
	add(in)

	// Queries the handler answers on the loop (even IDs), off it (odd),
	// panics on, and a response; a stream that goes back; GOAWAY.
	in = newH2Input(true)
	resp := q(8)
	resp[2] |= 0x80
	in.headers(1, true, h2Request("GET", DoHPath+"?dns="+b64(q(fuzzPanicID)))...)
	in.headers(3, true, h2Request("GET", DoHPath+"?dns="+b64(resp))...)
	in.headers(5, true, h2Request("GET", DoHPath+"?dns="+b64(q(9)))...)
	in.headers(7, true, h2Request("GET", DoHPath+"?dns=AAAA")...) // shorter than a header
	in.headers(9, true, h2Request("GET", DoHPath+"?dns=!!!!")...)
	in.fr.WriteGoAway(9, http2.ErrCodeNo, nil)
	add(in)

	in = newH2Input(true)
	in.headers(3, true, h2Request("GET", DoHPath+"?dns="+b64(q(10)))...)
	in.headers(1, true, h2Request("GET", DoHPath+"?dns="+b64(q(10)))...)
	add(in)

	// Frames the framer refuses: a frame header announcing 16 MiB,
	// DATA on stream 0, a WINDOW_UPDATE of 0, a bad preface.
	in = newH2Input(true)
	in.buf.Write([]byte{0xff, 0xff, 0xff, byte(http2.FrameData), 0, 0, 0, 0, 1})
	add(in)
	in = newH2Input(true)
	in.fr.WriteWindowUpdate(1, 0)
	in.fr.WriteData(0, true, []byte("x"))
	add(in)
	seeds = append(seeds, []byte("GET / HTTP/1.1\r\nHost: dns.test\r\n\r\n"), []byte(http2.ClientPreface[:10]), nil)
	return seeds
}

// FuzzServeH2 runs DoH's HTTP/2 connection loop (serveH2) on arbitrary
// client bytes after the TLS handshake, preface included, over an
// in-memory connection that ends with them. The loop must end once they
// are read, write only frames that parse, answer each stream the client
// opened at most once and no other, close the connection and leave no
// goroutine behind; and the memory it allocates is bounded by the input's
// size, not by what a frame header announces.
func FuzzServeH2(f *testing.F) {
	for _, s := range h2Seeds(f) {
		f.Add(s)
	}
	var mu sync.Mutex
	var violations []string
	h := &fuzzH2Handler{report: func(v string) {
		mu.Lock()
		violations = append(violations, v)
		mu.Unlock()
	}}
	s := &Server{Handler: h, TCPIdleTimeout: ioTimeout}
	startServer(f, s)

	f.Fuzz(func(t *testing.T, in []byte) {
		leaks := goleak.IgnoreCurrent()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		conn := &memConn{r: bytes.NewReader(in)}
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.serveH2(conn, netip.MustParseAddrPort("127.0.0.2:5353"))
		}()
		select {
		case <-done:
		case <-time.After(10 * ioTimeout):
			t.Fatal("serveH2 still running after its input ended")
		}
		runtime.ReadMemStats(&after)
		if !conn.closed {
			t.Fatal("serveH2 returned without closing the connection")
		}
		// A connection's fixed cost (its buffers, framer, HPACK tables)
		// is well under 1 MiB; beyond it, no more than a few times what
		// the client sent (GET URLs are decoded, bodies copied).
		if alloc, limit := after.TotalAlloc-before.TotalAlloc, uint64(1<<20+16*len(in)); alloc > limit {
			t.Fatalf("serveH2 allocated %d bytes for %d bytes of input (limit %d)", alloc, len(in), limit)
		}
		checkH2Output(t, in, conn.out.Bytes())
		goleak.VerifyNone(t, leaks)
		mu.Lock()
		defer mu.Unlock()
		if len(violations) > 0 {
			v := violations
			violations = nil
			t.Fatal(v)
		}
	})
}

// fuzzH2Handler answers queries with even IDs on the loop (ServeFast),
// the others off it, and panics on fuzzPanicID; it reports a query shorter
// than a header or not over HTTPS.
type fuzzH2Handler struct{ report func(string) }

func (h *fuzzH2Handler) check(req *Request) {
	if len(req.Raw) < dnsmsg.HeaderLen || req.Proto != ProtoHTTPS {
		h.report(fmt.Sprintf("handler given %d bytes over %q", len(req.Raw), req.Proto))
	}
}

func (h *fuzzH2Handler) ServeFast(req *Request) ([]byte, bool) {
	h.check(req)
	if binary.BigEndian.Uint16(req.Raw)%2 == 1 {
		return nil, false
	}
	return dnsmsg.Reply(req.Raw, dns.RcodeSuccess), true
}

func (h *fuzzH2Handler) ServeDNS(_ context.Context, req *Request) []byte {
	h.check(req)
	if binary.BigEndian.Uint16(req.Raw) == fuzzPanicID {
		panic("fuzzed query asked for it")
	}
	return dnsmsg.Reply(req.Raw, dns.RcodeSuccess)
}

// checkH2Output reads what serveH2 wrote for the client's bytes in: without
// the preface, at most a GOAWAY; with it, SETTINGS first, then only frames that parse,
// responses only on odd streams the client opened with HEADERS (at most
// once each), the stream of every DATA frame answered before it, and one
// GOAWAY at most.
func checkH2Output(t *testing.T, in, out []byte) {
	t.Helper()
	preface := bytes.HasPrefix(in, []byte(http2.ClientPreface))
	var opened map[uint32]bool
	if preface {
		opened = clientStreams(in[len(http2.ClientPreface):])
	}
	fr := http2.NewFramer(nil, bytes.NewReader(out))
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	answered := make(map[uint32]bool)
	goAways := 0
	for i := 0; ; i++ {
		fm, err := fr.ReadFrame()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("frame %d written does not parse: %v", i, err)
		}
		id := fm.Header().StreamID
		if _, goAway := fm.(*http2.GoAwayFrame); !preface && !goAway {
			t.Fatalf("a %v frame written without a preface", fm.Header().Type)
		}
		switch fm := fm.(type) {
		case *http2.SettingsFrame:
			if i == 0 && fm.IsAck() {
				t.Fatal("the first frame is a SETTINGS ACK")
			}
		case *http2.MetaHeadersFrame:
			if !opened[id] || answered[id] {
				t.Fatalf("HEADERS on stream %d: opened %v, answered already %v", id, opened[id], answered[id])
			}
			answered[id] = true
			if fm.PseudoValue("status") == "" {
				t.Fatalf("a response without :status on stream %d", id)
			}
		case *http2.DataFrame:
			if !answered[id] {
				t.Fatalf("DATA on stream %d before its HEADERS", id)
			}
		case *http2.GoAwayFrame:
			if goAways++; goAways > 1 {
				t.Fatalf("a second GOAWAY (%v)", fm.ErrCode)
			}
		default:
			if i == 0 {
				t.Fatalf("the first frame is %v, not SETTINGS", fm.Header().Type)
			}
		}
	}
}

// clientStreams returns the streams whose HEADERS frames in (after the
// preface) begin, read as frame headers alone.
func clientStreams(in []byte) map[uint32]bool {
	opened := make(map[uint32]bool)
	for len(in) >= 9 {
		n := int(in[0])<<16 | int(in[1])<<8 | int(in[2])
		if http2.FrameType(in[3]) == http2.FrameHeaders {
			opened[binary.BigEndian.Uint32(in[5:])&(1<<31-1)] = true
		}
		if len(in)-9 < n {
			break
		}
		in = in[9+n:]
	}
	return opened
}
