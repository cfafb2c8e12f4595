package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/internal/testca"
)

// testCA is a throwaway CA and a certificate it issued for testca.TLSName
// and 127.0.0.1.
type testCA struct {
	ca   *testca.CA
	cert tls.Certificate
}

func newTestCA(tb testing.TB) *testCA {
	tb.Helper()
	now := time.Now()
	ca, err := testca.New("server test CA", now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		tb.Fatal(err)
	}
	return &testCA{ca: ca, cert: issue(tb, ca)}
}

func issue(tb testing.TB, ca *testca.CA) tls.Certificate {
	tb.Helper()
	cert, err := ca.Issue(testca.TLSName, "127.0.0.1")
	if err != nil {
		tb.Fatal(err)
	}
	return cert
}

// clientConfig trusts the CA alone and names the server as its certificate does.
func (c *testCA) clientConfig() *tls.Config {
	return &tls.Config{RootCAs: c.ca.Pool(), ServerName: testca.TLSName}
}

// rotating is a certificate behind an atomic pointer, as the daemon keeps
// it: a new one affects only the connections made after it.
type rotating struct {
	cur atomic.Pointer[tls.Certificate]
}

func (r *rotating) config() *tls.Config {
	return &tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		return r.cur.Load(), nil
	}}
}

// startEncrypted starts s with one DoT and one DoH address on loopback
// (beside a UDP/TCP one), presenting ca's certificate unless s has a TLS
// configuration already, and returns the DoT and DoH addresses.
func startEncrypted(tb testing.TB, s *Server, ca *testCA) (dot, doh string) {
	tb.Helper()
	s.TLSListen, s.HTTPSListen = []string{"127.0.0.1:0"}, []string{"127.0.0.1:0"}
	if s.TLSConfig == nil {
		s.TLSConfig = &tls.Config{Certificates: []tls.Certificate{ca.cert}}
	}
	startServer(tb, s)
	t, h := s.EncryptedAddrs()
	return t[0].String(), h[0].String()
}

// dialDoT opens a DoT client connection, closed when the test ends.
func dialDoT(tb testing.TB, addr string, conf *tls.Config) *tls.Conn {
	tb.Helper()
	d := &net.Dialer{Timeout: ioTimeout}
	c, err := tls.DialWithDialer(d, "tcp", addr, conf)
	if err != nil {
		tb.Fatalf("dialing DoT %s: %v", addr, err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// One DoT connection carries 100 pipelined queries at once, and their
// answers go out in the order the handler finishes them, not the order
// they were asked (RFC 7858 section 3.3, RFC 7766 6.2.1.1): the handler
// finishes them last to first, and each answer comes before any other is
// released. (Serving a connection's queries one at a time, as a naive
// read-answer loop does, deadlocks here: the first query waits for the
// last.)
func TestDoTPipelinedAnswersOutOfOrder(t *testing.T) {
	t.Parallel()
	const n, base = 100, 1000
	ca := newTestCA(t)
	var gates [n]chan struct{}
	for i := range gates {
		gates[i] = make(chan struct{})
	}
	arrived := make(chan uint16, n)
	s := &Server{Handler: HandlerFunc(func(ctx context.Context, req *Request) []byte {
		id := binary.BigEndian.Uint16(req.Raw)
		if req.Proto != ProtoTLS {
			return nil // the test sees a missing answer
		}
		arrived <- id
		select {
		case <-gates[id-base]:
		case <-ctx.Done():
		}
		return echo(ctx, req)
	})}
	dot, _ := startEncrypted(t, s, ca)
	released := make([]bool, n)
	t.Cleanup(func() { // before Shutdown: cleanups run last first
		for i, r := range released {
			if !r {
				close(gates[i])
			}
		}
	})

	c := dialDoT(t, dot, ca.clientConfig())
	var frames []byte
	for i := range uint16(n) {
		b := pack(t, newQuery(base+i, "example.org."))
		frames = binary.BigEndian.AppendUint16(frames, uint16(len(b)))
		frames = append(frames, b...)
	}
	c.SetDeadline(time.Now().Add(5 * ioTimeout))
	if _, err := c.Write(frames); err != nil {
		t.Fatal(err)
	}
	for range n {
		select {
		case <-arrived:
		case <-time.After(5 * ioTimeout):
			t.Fatal("the pipelined queries were not all in the handler at once")
		}
	}
	dc := &dns.Conn{Conn: c}
	for i := n - 1; i >= 0; i-- {
		close(gates[i])
		released[i] = true
		r, err := dc.ReadMsg()
		if err != nil {
			t.Fatalf("reading answer %d: %v", i, err)
		}
		if r.Id != uint16(base+i) {
			t.Fatalf("answer %d came when only query %d had been answered", r.Id, base+i)
		}
		txt := r.Answer[0].(*dns.TXT).Txt
		if txt[0] != ProtoTLS || txt[1] != c.LocalAddr().String() {
			t.Fatalf("handler saw proto %q client %q, want %q %s", txt[0], txt[1], ProtoTLS, c.LocalAddr())
		}
	}
}

// The certificate comes from TLSConfig's GetCertificate at each handshake:
// one swapped in is presented to the next connection, on DoT and DoH
// alike, while a connection made before it goes on being served.
func TestEncryptedCertificateRotation(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	var cert rotating
	cert.cur.Store(&ca.cert)
	s := &Server{Handler: HandlerFunc(echo), TLSConfig: cert.config()}
	dot, doh := startEncrypted(t, s, ca)

	old := dialDoT(t, dot, ca.clientConfig())
	if got := leaf(t, old); !got.Equal(mustLeaf(t, ca.cert)) {
		t.Fatal("the first connection did not get the first certificate")
	}
	next := issue(t, ca.ca)
	cert.cur.Store(&next)

	if got := leaf(t, dialDoT(t, dot, ca.clientConfig())); !got.Equal(mustLeaf(t, next)) {
		t.Error("a DoT connection after the rotation got the old certificate")
	}
	hc := dohClient(t, ca, true)
	resp := dohGet(t, hc, "https://"+doh+DoHPath, pack(t, newQuery(7, "example.org.")))
	if resp.TLS == nil || !resp.TLS.PeerCertificates[0].Equal(mustLeaf(t, next)) {
		t.Error("a DoH connection after the rotation got the old certificate")
	}
	if r := exchangeOn(t, &dns.Conn{Conn: old}, newQuery(8, "example.org.")); r.Id != 8 {
		t.Errorf("the connection made before the rotation: answer %d", r.Id)
	}
}

func leaf(tb testing.TB, c *tls.Conn) *x509.Certificate {
	tb.Helper()
	st := c.ConnectionState()
	if len(st.PeerCertificates) == 0 {
		tb.Fatal("no peer certificate")
	}
	return st.PeerCertificates[0]
}

func mustLeaf(tb testing.TB, c tls.Certificate) *x509.Certificate {
	tb.Helper()
	x, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		tb.Fatal(err)
	}
	return x
}

// A DoT client that does not finish its handshake, or that trickles a
// query, is disconnected after the idle timeout, as a TCP one is; the
// server closes, not the test's far longer deadline.
func TestDoTSlowClientsClosed(t *testing.T) {
	t.Parallel()
	const idle = 100 * time.Millisecond
	ca := newTestCA(t)
	dot, _ := startEncrypted(t, &Server{Handler: HandlerFunc(echo), TCPIdleTimeout: idle}, ca)

	t.Run("handshake", func(t *testing.T) {
		c, err := net.DialTimeout("tcp", dot, ioTimeout)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write([]byte{0x16, 0x03, 0x01}) // the start of a ClientHello, no more
		expectClosed(t, c)
	})
	t.Run("query", func(t *testing.T) {
		c := dialDoT(t, dot, ca.clientConfig())
		b := pack(t, newQuery(1, "example.org."))
		frame := binary.BigEndian.AppendUint16(nil, uint16(len(b)))
		c.SetWriteDeadline(time.Now().Add(ioTimeout))
		if _, err := c.Write(append(frame, b[:5]...)); err != nil { // never the rest
			t.Fatal(err)
		}
		expectClosed(t, c)
	})
}

// expectClosed waits for the server to close c: a read that ends without
// the test's own deadline firing. That deadline is far above the tests'
// idle timeouts, and below the 10 s net/http's HTTP/2 server waits for a
// preface on its own.
func expectClosed(tb testing.TB, c net.Conn) {
	tb.Helper()
	c.SetReadDeadline(time.Now().Add(2 * ioTimeout))
	buf := make([]byte, 512)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			tb.Fatal("the server kept the slow connection open")
		}
		return
	}
}

// DoT and DoH connections count toward MaxTCPConnections with the TCP
// ones: with the one connection allowed taken by a TCP client, a DoT and
// a DoH connection are closed at once, and once it is gone a DoT client
// is served.
func TestEncryptedConnectionsCountTowardTheLimit(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	taken := make(chan bool, 8)
	s := &Server{Handler: HandlerFunc(echo), MaxTCPConnections: 1}
	s.accepted = func(_ netip.Addr, ok bool) { taken <- ok }
	dot, doh := startEncrypted(t, s, ca)
	_, tcpAddrs := s.Addrs()
	tcp := dialTCP(t, tcpAddrs[0].String())
	if !<-taken {
		t.Fatal("the first TCP connection was refused")
	}
	for _, addr := range []string{dot, doh} {
		c, err := net.DialTimeout("tcp", addr, ioTimeout)
		if err != nil {
			t.Fatal(err)
		}
		if <-taken {
			t.Fatalf("a connection to %s past max_tcp_connections was taken", addr)
		}
		expectClosed(t, c)
		c.Close()
	}
	tcp.Close()
	// The TCP connection's slot comes back once its read loop has seen
	// the close; until then a DoT connection may be refused.
	for range 1000 {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: ioTimeout}, "tcp", dot, ca.clientConfig())
		ok := <-taken
		if !ok {
			if err == nil {
				c.Close()
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if r := exchangeOn(t, &dns.Conn{Conn: c}, newQuery(3, "example.org.")); r.Id != 3 {
			t.Errorf("answer %d", r.Id)
		}
		c.Close()
		return
	}
	t.Fatal("the TCP connection's slot never came back")
}
