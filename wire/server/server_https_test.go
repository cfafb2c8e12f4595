package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// dohClient is an HTTP client trusting ca, speaking HTTP/2 when h2, else
// HTTP/1.1 only; its idle connections are closed when the test ends.
func dohClient(tb testing.TB, ca *testCA, h2 bool) *http.Client {
	tb.Helper()
	tr := &http.Transport{TLSClientConfig: ca.clientConfig(), ForceAttemptHTTP2: h2}
	if !h2 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	tb.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: ioTimeout}
}

// dohGet sends query with GET ?dns= (base64url, no padding) to url.
func dohGet(tb testing.TB, hc *http.Client, url string, query []byte) *http.Response {
	tb.Helper()
	resp, err := hc.Get(url + "?dns=" + base64.RawURLEncoding.EncodeToString(query))
	if err != nil {
		tb.Fatalf("GET %s: %v", url, err)
	}
	tb.Cleanup(func() { resp.Body.Close() })
	return resp
}

// dohPost posts body as contentType to url.
func dohPost(tb testing.TB, hc *http.Client, url, contentType string, body []byte) *http.Response {
	tb.Helper()
	resp, err := hc.Post(url, contentType, bytes.NewReader(body))
	if err != nil {
		tb.Fatalf("POST %s: %v", url, err)
	}
	tb.Cleanup(func() { resp.Body.Close() })
	return resp
}

// readAnswer checks that resp is a DoH answer and returns its message.
func readAnswer(tb testing.TB, resp *http.Response) *dns.Msg {
	tb.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("status %d (%s)", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/dns-message" {
		tb.Errorf("Content-Type %q", ct)
	}
	var m dns.Msg
	if err := m.Unpack(b); err != nil {
		tb.Fatalf("unpacking the answer: %v", err)
	}
	return &m
}

// nameEcho answers like echo, its TXT also holding the client name.
func nameEcho(ctx context.Context, req *Request) []byte {
	var q dns.Msg
	if err := q.Unpack(req.Raw); err != nil || q.Response {
		return nil
	}
	r := new(dns.Msg).SetReply(&q)
	r.Answer = []dns.RR{
		&dns.TXT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 300},
			Txt: []string{req.Proto, req.Client.String(), req.ClientName}},
		&dns.A{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 42}, A: net.IPv4(192, 0, 2, 1)},
	}
	b, _ := r.Pack()
	return b
}

// GET and POST, over HTTP/2 and over HTTP/1.1, reach the handler as
// proto https with the client's address and the path's name, and the
// answer carries the smallest answer TTL as max-age.
func TestDoHGetAndPost(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	_, doh := startEncrypted(t, &Server{Handler: HandlerFunc(nameEcho)}, ca)
	for _, h2 := range []bool{true, false} {
		for _, method := range []string{"GET", "POST"} {
			for _, name := range []string{"", "pixel-7"} {
				hc := dohClient(t, ca, h2)
				url := "https://" + doh + DoHPath
				if name != "" {
					url += "/" + name
				}
				q := pack(t, newQuery(0, "example.org."))
				var resp *http.Response
				if method == "GET" {
					resp = dohGet(t, hc, url, q)
				} else {
					resp = dohPost(t, hc, url, "application/dns-message", q)
				}
				if want := map[bool]int{true: 2, false: 1}[h2]; resp.ProtoMajor != want {
					t.Errorf("%s %s: HTTP/%d, want HTTP/%d", method, url, resp.ProtoMajor, want)
				}
				m := readAnswer(t, resp)
				txt := m.Answer[0].(*dns.TXT).Txt
				if txt[0] != ProtoHTTPS || txt[2] != name {
					t.Errorf("%s %s over HTTP/%d: handler saw proto %q name %q, want %q %q",
						method, url, resp.ProtoMajor, txt[0], txt[2], ProtoHTTPS, name)
				}
				if !strings.HasPrefix(txt[1], "127.0.0.1:") {
					t.Errorf("handler saw client %q", txt[1])
				}
				if cc := resp.Header.Get("Cache-Control"); cc != "max-age=42" {
					t.Errorf("Cache-Control %q, want max-age=42", cc)
				}
			}
		}
	}
}

// Requests that are not DoH's are refused with the status RFC 8484 and
// HTTP give them, without reaching the handler.
func TestDoHBadRequests(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	reached := make(chan string, 32)
	s := &Server{Handler: HandlerFunc(func(ctx context.Context, req *Request) []byte {
		reached <- req.ClientName
		return echo(ctx, req)
	})}
	_, doh := startEncrypted(t, s, ca)
	base := "https://" + doh
	q := pack(t, newQuery(1, "example.org."))
	response := pack(t, new(dns.Msg).SetReply(newQuery(1, "example.org.")))
	hc := dohClient(t, ca, true)
	for _, tc := range []struct {
		name, method, path, contentType string
		body                            []byte
		want                            int
		reaches                         bool // the handler sees it (and drops it)
	}{
		{"wrong path", "GET", "/resolve?dns=" + b64(q), "", nil, 404, false},
		{"root", "GET", "/?dns=" + b64(q), "", nil, 404, false},
		{"upper-case name", "GET", "/dns-query/Phone?dns=" + b64(q), "", nil, 404, false},
		{"name too long", "GET", "/dns-query/" + strings.Repeat("a", 64) + "?dns=" + b64(q), "", nil, 404, false},
		{"path below a name", "GET", "/dns-query/a/b?dns=" + b64(q), "", nil, 404, false},
		{"empty name", "GET", "/dns-query/?dns=" + b64(q), "", nil, 404, false},
		{"no dns parameter", "GET", "/dns-query", "", nil, 400, false},
		{"bad base64", "GET", "/dns-query?dns=!!!", "", nil, 400, false},
		{"shorter than a header", "GET", "/dns-query?dns=" + b64(q[:5]), "", nil, 400, false},
		{"wrong media type", "POST", "/dns-query", "application/json", q, 415, false},
		{"no media type", "POST", "/dns-query", "", q, 415, false},
		{"empty body", "POST", "/dns-query", "application/dns-message", nil, 400, false},
		{"malformed body", "POST", "/dns-query", "application/dns-message", []byte("\x00\x01garbage"), 400, false},
		{"too large", "POST", "/dns-query", "application/dns-message", make([]byte, 70000), 413, false},
		{"other method", "PUT", "/dns-query", "application/dns-message", q, 405, false},
		{"a response, not a query", "POST", "/dns-query/x", "application/dns-message", response, 400, true},
	} {
		req, err := http.NewRequest(tc.method, base+tc.path, bytes.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		if tc.contentType != "" {
			req.Header.Set("Content-Type", tc.contentType)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.want)
		}
		if tc.reaches {
			<-reached
		}
		select {
		case name := <-reached:
			t.Errorf("%s: reached the handler (name %q)", tc.name, name)
		default:
		}
	}
	// And the server still serves well-formed requests.
	if m := readAnswer(t, dohGet(t, hc, base+DoHPath, q)); m.Id != 1 {
		t.Errorf("answer %d", m.Id)
	}
	<-reached
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// A DoH client that does not finish its handshake, that trickles its
// HTTP/1.1 request headers, or that never sends its HTTP/2 preface, is
// disconnected after the idle timeout (net/http alone would wait 10 s for
// the preface).
func TestDoHSlowClientsClosed(t *testing.T) {
	t.Parallel()
	const idle = 100 * time.Millisecond
	ca := newTestCA(t)
	_, doh := startEncrypted(t, &Server{Handler: HandlerFunc(echo), TCPIdleTimeout: idle}, ca)

	t.Run("handshake", func(t *testing.T) {
		c, err := net.DialTimeout("tcp", doh, ioTimeout)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write([]byte{0x16, 0x03, 0x01})
		expectClosed(t, c)
	})
	t.Run("http1 headers", func(t *testing.T) {
		conf := ca.clientConfig()
		conf.NextProtos = []string{"http/1.1"}
		c := dialDoT(t, doh, conf)
		c.SetWriteDeadline(time.Now().Add(ioTimeout))
		if _, err := io.WriteString(c, "GET /dns-query?dns=AAAB HTTP/1.1\r\nHost: x\r\n"); err != nil {
			t.Fatal(err)
		}
		expectClosed(t, c)
	})
	t.Run("http2 preface", func(t *testing.T) {
		conf := ca.clientConfig()
		conf.NextProtos = []string{"h2"}
		c := dialDoT(t, doh, conf)
		if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
			t.Fatalf("negotiated %q, want h2", p)
		}
		expectClosed(t, c)
	})
	t.Run("http2 idle", func(t *testing.T) {
		conf := ca.clientConfig()
		conf.NextProtos = []string{"h2"}
		c := dialDoT(t, doh, conf)
		c.SetWriteDeadline(time.Now().Add(ioTimeout))
		// The preface and an empty SETTINGS frame, then nothing.
		if _, err := io.WriteString(c, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"); err != nil {
			t.Fatal(err)
		}
		expectClosed(t, c)
	})
}

// A query past MaxConcurrentQueries is answered REFUSED over DoH as over
// UDP, with status 200, without reaching the handler.
func TestDoHOverloadRefused(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	overloaded := make(chan string, 1)
	s := &Server{
		Handler: HandlerFunc(func(ctx context.Context, req *Request) []byte {
			entered <- struct{}{}
			<-release
			return echo(ctx, req)
		}),
		MaxConcurrentQueries: 1,
		OnOverload: func(_ []byte, proto string, _ netip.AddrPort) {
			overloaded <- proto
		},
	}
	_, doh := startEncrypted(t, s, ca)
	t.Cleanup(func() { close(release) })
	hc := dohClient(t, ca, true)
	url := "https://" + doh + DoHPath
	first := make(chan *http.Response, 1)
	q1 := pack(t, newQuery(1, "example.org."))
	go func() {
		resp, err := hc.Post(url, "application/dns-message", bytes.NewReader(q1))
		if err != nil {
			first <- nil
			return
		}
		first <- resp
	}()
	<-entered
	m := readAnswer(t, dohPost(t, hc, url, "application/dns-message", pack(t, newQuery(2, "example.org."))))
	if m.Rcode != dns.RcodeRefused || m.Id != 2 {
		t.Errorf("the query past the limit: %s, id %d", dns.RcodeToString[m.Rcode], m.Id)
	}
	if p := <-overloaded; p != ProtoHTTPS {
		t.Errorf("OnOverload heard proto %q", p)
	}
	release <- struct{}{}
	if resp := <-first; resp == nil {
		t.Error("the first query failed")
	} else {
		resp.Body.Close()
	}
}

// Shutdown lets a DoH query in flight finish and its answer be written,
// and returns only after the handler has.
func TestDoHShutdownFinishesQueriesInFlight(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	entered := make(chan struct{})
	release := make(chan struct{})
	returned := make(chan struct{})
	s := &Server{Handler: HandlerFunc(func(ctx context.Context, req *Request) []byte {
		close(entered)
		<-release
		defer close(returned)
		return echo(ctx, req)
	})}
	s.Listen, s.TLSListen, s.HTTPSListen = []string{"127.0.0.1:0"}, nil, []string{"127.0.0.1:0"}
	s.TLSConfig = &tls.Config{Certificates: []tls.Certificate{ca.cert}}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	_, h := s.EncryptedAddrs()
	hc := dohClient(t, ca, true)
	q := pack(t, newQuery(9, "example.org."))
	got := make(chan *dns.Msg, 1)
	go func() {
		resp, err := hc.Post("https://"+h[0].String()+DoHPath, "application/dns-message", bytes.NewReader(q))
		if err != nil {
			got <- nil
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var m dns.Msg
		if m.Unpack(b) != nil {
			got <- nil
			return
		}
		got <- &m
	}()
	<-entered
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		done <- s.Shutdown(ctx)
	}()
	close(release)
	if m := <-got; m == nil || m.Id != 9 {
		t.Errorf("the query in flight at shutdown: %v", m)
	}
	if err := <-done; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	select {
	case <-returned:
	default:
		t.Error("Shutdown returned before the handler")
	}
}
