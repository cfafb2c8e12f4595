package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// FuzzDoHRequest decodes arbitrary DoH requests — method, request target
// (the path with DoHPath/NAME, the query with ?dns=), content type, body —
// both ways nxdnsd reads them: HTTP/1.1 (serveHTTPS, readDoHQuery) and
// HTTP/2 (serveH2's own decoding). Both must give the same status and
// the same answer, that status one of 200, 400, 404, 405, 413, 415; the
// query the handler sees is what base64url (padding forgiven) or the body
// gives, at most 65,535 bytes, and the client name what the path names.
func FuzzDoHRequest(f *testing.F) {
	q := pack(f, newQuery(1, "example.org."))
	for _, s := range []struct{ method, target, ct, body string }{
		{"GET", DoHPath + "?dns=" + b64(q), "", ""},
		{"GET", DoHPath + "/laptop?ct=x&dns=" + b64(q) + "==", "", ""},
		{"GET", DoHPath + "/Laptop?dns=" + b64(q), "", ""},
		{"GET", DoHPath + "/%6captop?dns=" + b64(q), "", ""},
		{"GET", DoHPath + "%2Flaptop?dns=" + b64(q), "", ""},
		{"GET", DoHPath + "/" + strings.Repeat("a", 64) + "?dns=" + b64(q), "", ""},
		{"GET", DoHPath + "?dns=" + base64.URLEncoding.EncodeToString(q[:13]), "", ""},
		{"GET", DoHPath + "?dns=" + base64.StdEncoding.EncodeToString(q), "", ""},
		{"GET", DoHPath + "?dns=AAAA", "", ""},
		{"GET", DoHPath + "?dns=&dns=" + b64(q), "", ""},
		{"GET", DoHPath + "?dns=" + strings.Repeat("A", 87384), "", ""},
		{"GET", DoHPath, "", ""},
		{"GET", "/elsewhere?dns=" + b64(q), "", ""},
		{"POST", DoHPath, dnsMessage, string(q)},
		{"POST", DoHPath + "/phone", "Application/DNS-Message; charset=x", string(q)},
		{"POST", DoHPath, "text/plain", string(q)},
		{"POST", DoHPath, dnsMessage, ""},
		{"POST", DoHPath, dnsMessage, string(make([]byte, 65536))},
		{"PUT", DoHPath, dnsMessage, string(q)},
	} {
		f.Add(s.method, s.target, s.ct, []byte(s.body))
	}
	s := &Server{Handler: HandlerFunc(func(_ context.Context, req *Request) []byte {
		var m dns.Msg
		if err := m.Unpack(req.Raw); err != nil || m.Response {
			return nil
		}
		r := new(dns.Msg).SetReply(&m)
		r.Answer = []dns.RR{&dns.TXT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeTXT, Class: dns.ClassINET},
			Txt: []string{req.Proto, req.ClientName, strconv.Itoa(len(req.Raw))}}}
		b, err := r.Pack()
		if err != nil {
			return nil
		}
		return b
	}), TCPIdleTimeout: ioTimeout}
	startServer(f, s)

	f.Fuzz(func(t *testing.T, method, target, ct string, body []byte) {
		u, err := url.ParseRequestURI(target)
		if err != nil || u.Host != "" || !strings.HasPrefix(target, "/") || method == "" || method == "HEAD" {
			return // no request net/http would serve, or one without a body
		}
		if method == http.MethodGet && len(body) > 0 {
			body = nil // HTTP/2 refuses a GET with a body; HTTP/1.1 ignores it
		}
		// HTTP/1.1.
		r := &http.Request{Method: method, URL: u, Header: http.Header{}, RemoteAddr: "127.0.0.2:5353",
			Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body))}
		if ct != "" {
			r.Header.Set("Content-Type", ct)
		}
		w := httptest.NewRecorder()
		s.serveHTTPS(w, r)
		switch w.Code {
		case 200, 400, 404, 405, 413, 415:
		default:
			t.Fatalf("HTTP/1.1 %s %q: %d %q", method, target, w.Code, w.Body)
		}
		if w.Code == 200 {
			checkDoHAnswer(t, method, u, body, w.Body.Bytes())
		}

		// HTTP/2, the same request.
		in := newH2Input(true)
		fields := h2Request(method, target)
		if ct != "" {
			fields = append(fields, "content-type", ct)
		}
		in.headers(1, len(body) == 0, fields...)
		for rest := body; len(rest) > 0; {
			n := min(len(rest), h2MaxFrame)
			in.fr.WriteData(1, n == len(rest), rest[:n])
			rest = rest[n:]
		}
		conn := &memConn{r: bytes.NewReader(in.bytes())}
		s.serveH2(conn, netip.MustParseAddrPort("127.0.0.2:5353"))
		status, answer, ok := h2Response(t, conn.out.Bytes())
		if !ok {
			return // the framer refused a field (a byte HTTP/2 forbids): reset, no status
		}
		if status != strconv.Itoa(w.Code) || !bytes.Equal(answer, w.Body.Bytes()) && w.Code == 200 {
			t.Fatalf("%s %q (content type %q, %d bytes): HTTP/1.1 %d, HTTP/2 %s\n%x\n%x", method, target, ct, len(body), w.Code, status, w.Body.Bytes(), answer)
		}
	})
}

// checkDoHAnswer checks the answer to a 200 request: the handler saw the
// query the request carried and the client name its path gave.
func checkDoHAnswer(t *testing.T, method string, u *url.URL, body, answer []byte) {
	t.Helper()
	want := body
	if method == http.MethodGet {
		v, _ := dnsParam(u.RawQuery)
		var err error
		want, err = base64.RawURLEncoding.DecodeString(strings.TrimRight(v, "="))
		if err != nil {
			t.Fatalf("GET %q answered 200, but its dns parameter does not decode: %v", u, err)
		}
	}
	var m dns.Msg
	if err := m.Unpack(answer); err != nil || len(m.Answer) != 1 {
		t.Fatalf("answer %x: %v", answer, err)
	}
	txt := m.Answer[0].(*dns.TXT).Txt
	name := strings.TrimPrefix(strings.TrimPrefix(u.EscapedPath(), DoHPath), "/")
	if len(want) > maxDNSMessage || txt[0] != ProtoHTTPS || txt[1] != name || txt[2] != strconv.Itoa(len(want)) {
		t.Fatalf("%s %q: the handler saw %q, want a query of %d bytes from %q", method, u, txt, len(want), name)
	}
}

// h2Response reads stream 1's status and body from what serveH2 wrote;
// ok is false when the stream was reset instead.
func h2Response(t *testing.T, out []byte) (status string, body []byte, ok bool) {
	t.Helper()
	fr := http2.NewFramer(nil, bytes.NewReader(out))
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return status, body, status != ""
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			status = f.PseudoValue("status")
		case *http2.DataFrame:
			body = append(body, f.Data()...)
		case *http2.RSTStreamFrame:
			return "", nil, false
		}
	}
}
