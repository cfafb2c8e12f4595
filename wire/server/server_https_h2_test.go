package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// bigAnswer answers with a TXT record set of about size bytes.
func bigAnswer(size int) HandlerFunc {
	return func(_ context.Context, req *Request) []byte {
		var q dns.Msg
		if err := q.Unpack(req.Raw); err != nil || q.Response {
			return nil
		}
		r := new(dns.Msg).SetReply(&q)
		for n := 0; n < size; n += 260 {
			r.Answer = append(r.Answer, &dns.TXT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60},
				Txt: []string{string(bytes.Repeat([]byte{'a' + byte(n%26)}, 250))}})
		}
		b, err := r.Pack()
		if err != nil {
			return nil
		}
		return b
	}
}

// An answer larger than an HTTP/2 frame and than the client's windows
// goes out whole, split into frames and sent as the client opens its
// windows (RFC 9113 5.2), over a connection that keeps serving others.
func TestDoHFlowControl(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	_, doh := startEncrypted(t, &Server{Handler: bigAnswer(60000)}, ca)
	tr := &http.Transport{TLSClientConfig: ca.clientConfig(), ForceAttemptHTTP2: true,
		HTTP2: &http.HTTP2Config{MaxReceiveBufferPerStream: 4096, MaxReceiveBufferPerConnection: 8192}}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr, Timeout: ioTimeout}
	for i := range 3 {
		resp := dohGet(t, hc, "https://"+doh+DoHPath, pack(t, newQuery(uint16(i), "example.org.")))
		if resp.ProtoMajor != 2 {
			t.Fatalf("HTTP/%d", resp.ProtoMajor)
		}
		m := readAnswer(t, resp)
		if b, _ := m.Pack(); len(b) < 60000 || m.Id != uint16(i) {
			t.Fatalf("answer %d: %d bytes, id %d", i, len(b), m.Id)
		}
	}
}

// h2Client is a raw HTTP/2 client connection, for what net/http's client
// never sends.
type h2Client struct {
	fr   *http2.Framer
	conn *tls.Conn
}

func dialH2(tb testing.TB, ca *testCA, addr string) *h2Client {
	tb.Helper()
	conf := ca.clientConfig()
	conf.NextProtos = []string{"h2"}
	c := dialDoT(tb, addr, conf)
	c.SetDeadline(time.Now().Add(ioTimeout))
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		tb.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := fr.WriteSettings(); err != nil {
		tb.Fatal(err)
	}
	return &h2Client{fr: fr, conn: c}
}

// next reads frames until one of type want (settings and window updates
// skipped) and returns it.
func (c *h2Client) next(tb testing.TB, want http2.FrameType) http2.Frame {
	tb.Helper()
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			tb.Fatalf("reading a frame (want %v): %v", want, err)
		}
		if f.Header().Type == want {
			return f
		}
		if t := f.Header().Type; t != http2.FrameSettings && t != http2.FrameWindowUpdate {
			tb.Fatalf("got a %v frame, want %v", t, want)
		}
	}
}

func (c *h2Client) headers(tb testing.TB, id uint32, end bool, fields ...string) {
	tb.Helper()
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	for i := 0; i < len(fields); i += 2 {
		enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: buf.Bytes(), EndHeaders: true, EndStream: end}); err != nil {
		tb.Fatal(err)
	}
}

// The HTTP/2 server answers a PING, answers a GET that carries a body and
// a POST without one 400, a POST in two DATA frames whole, and ends the
// connection with GOAWAY PROTOCOL_ERROR on a stream ID that goes back.
func TestDoHHTTP2Frames(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	_, doh := startEncrypted(t, &Server{Handler: HandlerFunc(echo)}, ca)
	c := dialH2(t, ca, doh)

	if err := c.fr.WritePing(false, [8]byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if p := c.next(t, http2.FramePing).(*http2.PingFrame); !p.IsAck() || p.Data != [8]byte{1, 2, 3} {
		t.Errorf("ping answer %+v", p)
	}
	// response reads stream id's response: its status and body.
	response := func(id uint32) (string, []byte) {
		t.Helper()
		h := c.next(t, http2.FrameHeaders).(*http2.MetaHeadersFrame)
		if h.StreamID != id {
			t.Fatalf("headers of stream %d, want %d", h.StreamID, id)
		}
		var body []byte
		for end := h.StreamEnded(); !end; {
			d := c.next(t, http2.FrameData).(*http2.DataFrame)
			body, end = append(body, d.Data()...), d.StreamEnded()
		}
		return h.PseudoValue("status"), body
	}
	status := func(id uint32) string {
		t.Helper()
		s, _ := response(id)
		return s
	}
	req := func(method, path string) []string {
		return []string{":method", method, ":scheme", "https", ":authority", "dns.test", ":path", path, "content-type", "application/dns-message"}
	}
	q := pack(t, newQuery(5, "example.org."))

	c.headers(t, 1, false, req("GET", DoHPath+"?dns="+b64(q))...)
	c.fr.WriteData(1, true, []byte("x"))
	if s := status(1); s != "400" {
		t.Errorf("a GET with a body: %s", s)
	}
	c.headers(t, 3, true, req("POST", DoHPath)...)
	if s := status(3); s != "400" {
		t.Errorf("a POST without a body: %s", s)
	}
	c.headers(t, 5, false, req("POST", DoHPath+"/two-frames")...)
	c.fr.WriteData(5, false, q[:7])
	c.fr.WriteData(5, true, q[7:])
	s, body := response(5)
	if s != "200" {
		t.Fatalf("a POST in two frames: %s", s)
	}
	var m dns.Msg
	if err := m.Unpack(body); err != nil || m.Id != 5 {
		t.Fatalf("the POST's answer: %v (%v)", m.Id, err)
	}

	c.headers(t, 3, true, req("GET", DoHPath+"?dns="+b64(q))...) // 3 < 5: goes back
	if g := c.next(t, http2.FrameGoAway).(*http2.GoAwayFrame); g.ErrCode != http2.ErrCodeProtocol {
		t.Errorf("GOAWAY %v, want PROTOCOL_ERROR", g.ErrCode)
	}
	expectClosed(t, c.conn)
}

// A client whose HPACK decoder keeps no dynamic table
// (SETTINGS_HEADER_TABLE_SIZE 0) can read every answer's headers: the
// encoder keeps none either.
func TestDoHHeaderTableSize(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	_, doh := startEncrypted(t, &Server{Handler: HandlerFunc(echo)}, ca)
	c := dialH2(t, ca, doh)
	if err := c.fr.WriteSettings(http2.Setting{ID: http2.SettingHeaderTableSize, Val: 0}); err != nil {
		t.Fatal(err)
	}
	c.fr.ReadMetaHeaders = hpack.NewDecoder(0, nil)
	q := b64(pack(t, newQuery(1, "example.org.")))
	for i, id := range []uint32{1, 3, 5} {
		c.headers(t, id, true, ":method", "GET", ":scheme", "https", ":authority", "dns.test", ":path", DoHPath+"?dns="+q)
		h := c.next(t, http2.FrameHeaders).(*http2.MetaHeadersFrame)
		if h.PseudoValue("status") != "200" {
			t.Fatalf("request %d: status %q", i, h.PseudoValue("status"))
		}
		for d := c.next(t, http2.FrameData).(*http2.DataFrame); !d.StreamEnded(); d = c.next(t, http2.FrameData).(*http2.DataFrame) {
		}
	}
}
