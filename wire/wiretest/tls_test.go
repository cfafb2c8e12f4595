package wiretest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// The CA's file holds its certificate, and what it issues verifies for the
// names asked for and no others.
func TestCAIssuesVerifiableCertificates(t *testing.T) {
	t.Parallel()
	ca := NewCA(t)
	data, err := os.ReadFile(ca.WriteFile(t))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, ca.PEM()) {
		t.Error("the CA file does not hold the CA's PEM")
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		t.Fatal("the CA file does not parse")
	}
	leaf, err := x509.ParseCertificate(ca.Certificate(t, TLSName, "127.0.0.1").Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{TLSName, "127.0.0.1"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: name}); err != nil {
			t.Errorf("verifying for %s: %v", name, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "other.test"}); err == nil {
		t.Error("the certificate verifies for a name it does not carry")
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: NewCA(t).Pool(), DNSName: TLSName}); err == nil {
		t.Error("the certificate verifies under another CA")
	}
}

// The DoT fake answers a stock DoT client and counts its connection.
func TestDoTServerAnswers(t *testing.T) {
	t.Parallel()
	ca := NewCA(t)
	srv := NewDoTServer(t, ca.Certificate(t, TLSName), Answer())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	c := &dns.Client{Net: "tcp-tls", TLSConfig: &tls.Config{RootCAs: ca.Pool(), ServerName: TLSName}}
	q := Query("example.com", dns.TypeA)
	r, _, err := c.ExchangeContext(ctx, q, srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	if r.Id != q.Id || len(r.Answer) != 1 {
		t.Errorf("answer %v does not answer %v", r, q)
	}
	if srv.Accepts() != 1 || srv.Queries() != 1 {
		t.Errorf("accepts=%d queries=%d, want 1 each", srv.Accepts(), srv.Queries())
	}
}

// Close stops a stalled DoT handler.
func TestDoTServerCloseUnblocksStalledHandlers(t *testing.T) {
	t.Parallel()
	ca := NewCA(t)
	received := make(chan string, 1)
	srv := NewDoTServer(t, ca.Certificate(t, TLSName), Notify(received, Stall))

	c, err := dns.DialWithTLS("tcp-tls", srv.Addr, &tls.Config{RootCAs: ca.Pool(), ServerName: TLSName})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.WriteMsg(Query("stall.example", dns.TypeA)); err != nil {
		t.Fatal(err)
	}
	<-received
	srv.Close() // returns only once every handler has
	srv.Close() // and is idempotent
}

// The DoH fake answers POST and GET over HTTP/2 with
// application/dns-message.
func TestDoHServerAnswersPostAndGet(t *testing.T) {
	t.Parallel()
	ca := NewCA(t)
	srv := NewDoHServer(t, ca.Certificate(t, "127.0.0.1"), Answer())
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	url := "https://" + srv.Addr + DoHPath

	q := Query("example.com", dns.TypeA)
	q.Id = 0
	raw, err := q.Pack()
	if err != nil {
		t.Fatal(err)
	}
	get, err := http.NewRequest(http.MethodGet, url+"?dns="+base64.RawURLEncoding.EncodeToString(raw), nil)
	if err != nil {
		t.Fatal(err)
	}
	post, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	post.Header.Set("Content-Type", dnsMessage)
	for _, req := range []*http.Request{get, post} {
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", req.Method, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		r := new(dns.Msg)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != dnsMessage || r.Unpack(body) != nil {
			t.Fatalf("%s: %s %q, body %x", req.Method, resp.Status, resp.Header.Get("Content-Type"), body)
		}
		if r.Id != 0 || len(r.Answer) != 1 {
			t.Errorf("%s: answer %v does not answer %v", req.Method, r, q)
		}
	}
	if srv.Requests() != 2 || srv.HTTP2Requests() != 2 || srv.Conns() != 1 {
		t.Errorf("requests=%d http2=%d conns=%d, want 2, 2, 1", srv.Requests(), srv.HTTP2Requests(), srv.Conns())
	}
}

// A TLS handshake with the blackhole stalls until the client's deadline.
func TestBlackholeStallsHandshakes(t *testing.T) {
	t.Parallel()
	bh := NewBlackhole(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	d := tls.Dialer{Config: &tls.Config{ServerName: TLSName}}
	if c, err := d.DialContext(ctx, "tcp", bh.Addr); err == nil {
		c.Close()
		t.Fatal("a handshake with the blackhole succeeded")
	}
	if ctx.Err() == nil {
		t.Error("the handshake failed before the deadline")
	}
}
