package daemon

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/config"
	"github.com/nxdnsd/nxdnsd/internal/testca"
	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// tlsFiles is a certificate pair in files, as cert_file and key_file
// name them, issued by a CA of the test's.
type tlsFiles struct {
	ca                *testca.CA
	dir               string
	certFile, keyFile string
}

func newTLSFiles(tb testing.TB) *tlsFiles {
	tb.Helper()
	now := time.Now()
	ca, err := testca.New("daemon test CA", now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		tb.Fatal(err)
	}
	f := &tlsFiles{ca: ca, dir: tb.TempDir()}
	f.rotate(tb)
	return f
}

// rotate writes a new certificate and key over the files, as a renewal
// does, and returns the new certificate.
func (f *tlsFiles) rotate(tb testing.TB) *x509.Certificate {
	tb.Helper()
	cert, err := f.ca.Issue(testca.TLSName, "127.0.0.1")
	if err != nil {
		tb.Fatal(err)
	}
	if f.certFile, f.keyFile, err = testca.WritePair(f.dir, "fullchain.pem", "privkey.pem", cert); err != nil {
		tb.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		tb.Fatal(err)
	}
	return leaf
}

// server is the [server] table serving DoT and DoH on loopback with f's
// pair, plus lines (startObserved adds listen).
func (f *tlsFiles) server(lines string) string {
	return fmt.Sprintf("[server]\ntls_listen = [\"127.0.0.1:0\"]\nhttps_listen = [\"127.0.0.1:0\"]\ncert_file = %q\nkey_file = %q\n%s\n",
		f.certFile, f.keyFile, lines)
}

func (f *tlsFiles) clientConfig() *tls.Config {
	return &tls.Config{RootCAs: f.ca.Pool(), ServerName: testca.TLSName}
}

// askDoT sends m over DNS over TLS to addr and returns the answer and the
// certificate the server presented.
func askDoT(tb testing.TB, f *tlsFiles, addr string, m *dns.Msg) (*dns.Msg, *x509.Certificate) {
	tb.Helper()
	c := &dns.Client{Net: "tcp-tls", TLSConfig: f.clientConfig(), Timeout: 3 * time.Second}
	conn, err := c.Dial(addr)
	if err != nil {
		tb.Fatalf("dialing DoT %s: %v", addr, err)
	}
	defer conn.Close()
	r, _, err := c.ExchangeWithConn(m, conn)
	if err != nil {
		tb.Fatalf("DoT query: %v", err)
	}
	return r, conn.Conn.(*tls.Conn).ConnectionState().PeerCertificates[0]
}

// askDoH posts m to url and returns the answer and the certificate the
// server presented, on a connection of its own.
func askDoH(tb testing.TB, f *tlsFiles, url string, m *dns.Msg) (*dns.Msg, *x509.Certificate) {
	tb.Helper()
	tr := &http.Transport{TLSClientConfig: f.clientConfig(), ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	b, err := m.Pack()
	if err != nil {
		tb.Fatal(err)
	}
	resp, err := (&http.Client{Transport: tr, Timeout: 3 * time.Second}).Post(url, "application/dns-message", bytes.NewReader(b))
	if err != nil {
		tb.Fatalf("DoH query: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		tb.Fatalf("DoH: status %d, %v", resp.StatusCode, err)
	}
	var r dns.Msg
	if err := r.Unpack(body); err != nil {
		tb.Fatal(err)
	}
	return &r, resp.TLS.PeerCertificates[0]
}

// encryptedAddrs returns the daemon's DoT address and DoH URL base.
func encryptedAddrs(tb testing.TB, d *Daemon) (dot, doh string) {
	tb.Helper()
	t, h := d.EncryptedAddrs()
	if len(t) != 1 || len(h) != 1 {
		tb.Fatalf("encrypted listeners %q %q", t, h)
	}
	return t[0], "https://" + h[0]
}

// DoT and DoH queries take the query path as UDP and TCP ones do: the
// pool answers, the query log says proto tls and https, and a DoH path's
// name is the line's client_name (and /api/queries', held to
// openapi.yaml).
func TestEncryptedQueriesReachThePoolAndTheLog(t *testing.T) {
	up := wiretest.NewServer(t, wiretest.Answer(wiretest.A("example.com.", 0)))
	f := newTLSFiles(t)
	o := startObserved(t, f.server("")+upstreamTOML(up.Addr), false, options{})
	dot, doh := encryptedAddrs(t, o.d)

	if r, _ := askDoT(t, f, dot, wiretest.Query("example.com.", dns.TypeA)); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("DoT: %s, %d answers", dns.RcodeToString[r.Rcode], len(r.Answer))
	}
	if r, _ := askDoH(t, f, doh+"/dns-query/pixel-7", wiretest.Query("example.com.", dns.TypeAAAA)); r.Rcode != dns.RcodeSuccess {
		t.Fatalf("DoH: %s", dns.RcodeToString[r.Rcode])
	}
	if r, _ := askDoH(t, f, doh+"/dns-query", wiretest.Query("localhost.", dns.TypeA)); r.Rcode != dns.RcodeSuccess {
		t.Fatalf("DoH: %s", dns.RcodeToString[r.Rcode])
	}
	lines := o.logLines(t)
	want := []struct{ proto, qtype, source, name string }{
		{"tls", "A", "pool", ""},
		{"https", "AAAA", "pool", "pixel-7"},
		{"https", "A", "special", ""},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d", len(lines), len(want))
	}
	for i, w := range want {
		l := lines[i]
		if l.Proto != w.proto || deref(l.QType) != w.qtype || l.source() != w.source || l.ClientName != w.name {
			t.Errorf("line %d: proto %s qtype %s source %s client_name %s, want %v",
				i, l.Proto, deref(l.QType), l.source(), l.ClientName, w)
		}
	}
	_, recent := o.recentQueries(t, "?limit=3")
	var newest struct {
		ClientName string `json:"client_name"`
	}
	if err := json.Unmarshal(recent[1], &newest); err != nil || newest.ClientName != "pixel-7" {
		t.Errorf("/api/queries: %s (%v)", recent[1], err)
	}
	fs := o.scrape(t)
	for _, proto := range []string{"tls", "https"} {
		if v := metricValue(t, fs, "nxdns_queries_total", "proto", proto, "rcode", "NOERROR"); v < 1 {
			t.Errorf("nxdns_queries_total{proto=%q} = %v", proto, v)
		}
	}
}

// A client outside server.allow is answered REFUSED with EDE 18 over DoT
// and DoH, as over UDP, and reaches no upstream.
func TestEncryptedClientsOutsideAllowAreRefused(t *testing.T) {
	up := wiretest.NewServer(t, wiretest.Answer())
	f := newTLSFiles(t)
	s := startDaemon(t, upstreamTOML(up.Addr)+f.server("listen = [\"127.0.0.1:0\"]\nallow = [\"10.0.0.0/8\"]"))
	dot, doh := encryptedAddrs(t, s.d)
	r1, _ := askDoT(t, f, dot, ednsQuery("example.com.", dns.TypeA))
	r2, _ := askDoH(t, f, doh+"/dns-query/phone", ednsQuery("example.com.", dns.TypeA))
	for proto, r := range map[string]*dns.Msg{"tls": r1, "https": r2} {
		if got := edeCodes(r); r.Rcode != dns.RcodeRefused || len(got) != 1 || got[0] != 18 {
			t.Errorf("%s from 127.0.0.1, outside 10.0.0.0/8: %s EDE %v; want REFUSED with EDE 18", proto, dns.RcodeToString[r.Rcode], got)
		}
	}
	if n := up.UDPQueries() + up.TCPQueries(); n != 0 {
		t.Errorf("the upstream saw %d queries of an outsider", n)
	}
}

// certbot's deploy hook writes the renewed pair over the files and sends
// SIGHUP: the next DoT and DoH connections get the new certificate, a
// connection made before goes on. A pair that does not match makes the
// reload invalid: counted as failed, and the certificate in force stays.
func TestCertificateRotatedByReload(t *testing.T) {
	up := wiretest.NewServer(t, wiretest.Answer(wiretest.A("example.com.", 0)))
	f := newTLSFiles(t)
	path := filepath.Join(f.dir, "nxdns.toml")
	src := f.server("listen = [\"127.0.0.1:0\"]") + upstreamTOML(up.Addr) + "[admin]\nlisten = \"\"\n[cache]\nenabled = false\n"
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	s := startConfig(t, cfg, nil, options{})
	dot, doh := encryptedAddrs(t, s.d)
	first := cfg.Server.Certificate.Leaf

	c := &dns.Client{Net: "tcp-tls", TLSConfig: f.clientConfig(), Timeout: 3 * time.Second}
	old, err := c.Dial(dot)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if got := old.Conn.(*tls.Conn).ConnectionState().PeerCertificates[0]; !got.Equal(first) {
		t.Fatal("the first connection did not get the configured certificate")
	}

	renewed := f.rotate(t)
	load := func() (*config.Config, error) { return config.Load(path) }
	if err := s.d.Reload(load); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if _, got := askDoT(t, f, dot, wiretest.Query("example.com.", dns.TypeA)); !got.Equal(renewed) {
		t.Error("a DoT connection after the reload did not get the renewed certificate")
	}
	if _, got := askDoH(t, f, doh+"/dns-query", wiretest.Query("example.com.", dns.TypeA)); !got.Equal(renewed) {
		t.Error("a DoH connection after the reload did not get the renewed certificate")
	}
	if r, _, err := c.ExchangeWithConn(wiretest.Query("example.com.", dns.TypeA), old); err != nil || r.Rcode != dns.RcodeSuccess {
		t.Errorf("the connection made before the reload: %v", err)
	}

	// A key that is not the certificate's: half a renewal.
	other := newTLSFiles(t)
	key, err := os.ReadFile(other.keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.d.Reload(load); err == nil {
		t.Fatal("a reload with a mismatched pair succeeded")
	}
	if _, got := askDoT(t, f, dot, wiretest.Query("example.com.", dns.TypeA)); !got.Equal(renewed) {
		t.Error("after a failed reload, the certificate in force changed")
	}
	fs := scrapeDaemon(t, s.d)
	if ok, fail := metricValue(t, fs, "nxdns_config_reloads_total", "result", "success"), metricValue(t, fs, "nxdns_config_reloads_total", "result", "failure"); ok != 1 || fail != 1 {
		t.Errorf("reloads: %v succeeded, %v failed; want 1 and 1", ok, fail)
	}
}

// A reload that adds a DoT address binds it, one that removes the DoH
// address closes it; the UDP/TCP listener is untouched.
func TestReloadChangesEncryptedListeners(t *testing.T) {
	up := wiretest.NewServer(t, wiretest.Answer(wiretest.A("example.com.", 0)))
	f := newTLSFiles(t)
	s := startDaemon(t, upstreamTOML(up.Addr)+fmt.Sprintf("[server]\nlisten = [\"127.0.0.1:0\"]\ncert_file = %q\nkey_file = %q\n", f.certFile, f.keyFile))
	if dot, doh := s.d.EncryptedAddrs(); len(dot)+len(doh) != 0 {
		t.Fatalf("encrypted listeners without tls_listen: %q %q", dot, doh)
	}
	// The same listen string: that listener is kept, not bound again.
	mustReload(t, s.d, upstreamTOML(up.Addr)+fmt.Sprintf("[server]\nlisten = [\"127.0.0.1:0\"]\ntls_listen = [\"127.0.0.1:0\"]\ncert_file = %q\nkey_file = %q\n", f.certFile, f.keyFile))
	dot, doh := s.d.EncryptedAddrs()
	if len(dot) != 1 || len(doh) != 0 {
		t.Fatalf("after adding tls_listen: %q %q", dot, doh)
	}
	if r, _ := askDoT(t, f, dot[0], wiretest.Query("example.com.", dns.TypeA)); r.Rcode != dns.RcodeSuccess {
		t.Errorf("DoT after the reload: %s", dns.RcodeToString[r.Rcode])
	}
	if r := ask(t, "udp", s.udp, wiretest.Query("example.com.", dns.TypeA)); r.Rcode != dns.RcodeSuccess {
		t.Errorf("UDP after the reload: %s", dns.RcodeToString[r.Rcode])
	}
}
