package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/nxdnsd/nxdnsd/wire/dnsmsg"
)

// ioTimeout bounds every client read and write in these tests. It is far
// above anything loopback needs, so it only fires when something is
// broken; the behaviour under test uses much shorter deadlines.
const ioTimeout = 2 * time.Second

// startServer starts s on an ephemeral loopback port (127.0.0.1, unless
// s.Listen names another) and shuts it down when the test ends. Tests that
// block their handler must unblock it in a cleanup registered after this
// call (cleanups run last-in first-out).
func startServer(tb testing.TB, s *Server) (udpAddr, tcpAddr string) {
	tb.Helper()
	if len(s.Listen) == 0 {
		s.Listen = []string{"127.0.0.1:0"}
	}
	if err := s.Start(); err != nil {
		tb.Fatalf("Start: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			tb.Errorf("Shutdown: %v", err)
		}
	})
	udp, tcp := s.Addrs()
	return udp[0].String(), tcp[0].String()
}

// echo answers a query with its own question and a TXT record holding the
// protocol and client address the handler was given. Unparseable queries
// and responses get no answer.
func echo(_ context.Context, req *Request) []byte {
	var q dns.Msg
	if err := q.Unpack(req.Raw); err != nil || q.Response {
		return nil
	}
	r := new(dns.Msg).SetReply(&q)
	r.Answer = []dns.RR{&dns.TXT{
		Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeTXT, Class: dns.ClassINET},
		Txt: []string{req.Proto, req.Client.String()},
	}}
	b, err := r.Pack()
	if err != nil {
		return nil
	}
	return b
}

// newQuery returns an A query for name with the given ID.
func newQuery(id uint16, name string) *dns.Msg {
	m := new(dns.Msg).SetQuestion(name, dns.TypeA)
	m.Id = id
	return m
}

func pack(tb testing.TB, m *dns.Msg) []byte {
	tb.Helper()
	b, err := m.Pack()
	if err != nil {
		tb.Fatalf("packing: %v", err)
	}
	return b
}

// dialDNS opens a client connection; its LocalAddr is what the server
// should report as Request.Client.
func dialDNS(tb testing.TB, network, addr string) *dns.Conn {
	tb.Helper()
	c, err := net.DialTimeout(network, addr, ioTimeout)
	if err != nil {
		tb.Fatalf("dialing %s %s: %v", network, addr, err)
	}
	tb.Cleanup(func() { c.Close() })
	return &dns.Conn{Conn: c}
}

// exchangeOn sends m on c and returns the next message read from it.
func exchangeOn(tb testing.TB, c *dns.Conn, m *dns.Msg) *dns.Msg {
	tb.Helper()
	c.SetDeadline(time.Now().Add(ioTimeout))
	if err := c.WriteMsg(m); err != nil {
		tb.Fatalf("writing query: %v", err)
	}
	r, err := c.ReadMsg()
	if err != nil {
		tb.Fatalf("reading answer: %v", err)
	}
	return r
}

// exchange sends m on a fresh connection and returns the answer.
func exchange(tb testing.TB, network, addr string, m *dns.Msg) *dns.Msg {
	tb.Helper()
	c := dialDNS(tb, network, addr)
	defer c.Close()
	return exchangeOn(tb, c, m)
}

// checkEcho fails unless r is echo's answer to q over proto from client.
func checkEcho(tb testing.TB, r, q *dns.Msg, proto, client string) {
	tb.Helper()
	if r.Id != q.Id || !r.Response || r.Rcode != dns.RcodeSuccess {
		tb.Fatalf("answer id=%d response=%v rcode=%s; want id=%d, a NOERROR response",
			r.Id, r.Response, dns.RcodeToString[r.Rcode], q.Id)
	}
	if len(r.Question) != 1 || r.Question[0] != q.Question[0] {
		tb.Fatalf("answer question %v, want %v", r.Question, q.Question)
	}
	if len(r.Answer) != 1 {
		tb.Fatalf("answer has %d records, want echo's TXT", len(r.Answer))
	}
	txt := r.Answer[0].(*dns.TXT).Txt
	if want := []string{proto, client}; strings.Join(txt, " ") != strings.Join(want, " ") {
		tb.Fatalf("handler saw %q, want %q", txt, want)
	}
}

// awaitClosed reports nil once the server has closed c (EOF or reset), or
// an error if c is still open after limit or delivers data.
func awaitClosed(c net.Conn, limit time.Duration) error {
	c.SetReadDeadline(time.Now().Add(limit))
	var b [64]byte
	n, err := c.Read(b[:])
	switch {
	case n > 0:
		return errors.New("read data, want the connection closed")
	case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
		return nil
	case err == nil:
		return errors.New("empty read")
	default:
		return err
	}
}

func TestServerUDPAndTCP(t *testing.T) {
	t.Parallel()
	udpAddr, tcpAddr := startServer(t, &Server{Handler: HandlerFunc(echo)})
	for _, tc := range []struct{ proto, addr string }{{"udp", udpAddr}, {"tcp", tcpAddr}} {
		c := dialDNS(t, tc.proto, tc.addr)
		q := newQuery(0x1234, "example.org.")
		r := exchangeOn(t, c, q)
		checkEcho(t, r, q, tc.proto, c.LocalAddr().String())
	}
}

func TestServerStart(t *testing.T) {
	t.Parallel()
	if err := (&Server{Listen: []string{"127.0.0.1:0"}}).Start(); err == nil {
		t.Error("Start without a handler succeeded")
	}
	if err := (&Server{Handler: HandlerFunc(echo)}).Start(); err == nil {
		t.Error("Start without an address succeeded")
	}
	if err := (&Server{Handler: HandlerFunc(echo), Listen: []string{"localhost:53"}}).Start(); err == nil {
		t.Error("Start on a host name succeeded")
	}

	s := &Server{Handler: HandlerFunc(echo)}
	startServer(t, s)
	if err := s.Start(); err == nil {
		t.Error("second Start succeeded")
	}
}

// A failed Start holds no socket: with the TCP port taken, the UDP socket
// it had bound on the same port is closed again.
func TestServerStartBindsAllOrNothing(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	addr := taken.Addr().String()

	s := &Server{Handler: HandlerFunc(echo), Listen: []string{addr}}
	if err := s.Start(); err == nil {
		s.Shutdown(context.Background())
		t.Fatalf("Start on %s, whose TCP port is taken, succeeded", addr)
	}
	if u, tc := s.Addrs(); len(u)+len(tc) != 0 {
		t.Errorf("Addrs after a failed Start = %v, %v; want none", u, tc)
	}
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Fatalf("the failed Start kept udp %s: %v", addr, err)
	}
	pc.Close()
	if err := s.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown after a failed Start: %v", err)
	}
}

func TestServerPanic(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.ErrorLevel)
	var panics atomic.Int64
	s := &Server{
		Handler: HandlerFunc(func(ctx context.Context, req *Request) []byte {
			if binary.BigEndian.Uint16(req.Raw) == 666 {
				panic("handler bug")
			}
			return echo(ctx, req)
		}),
		Logger:  zap.New(core),
		OnPanic: func() { panics.Add(1) },
	}
	udpAddr, tcpAddr := startServer(t, s)

	for i, tc := range []struct{ proto, addr string }{{"udp", udpAddr}, {"tcp", tcpAddr}} {
		c := dialDNS(t, tc.proto, tc.addr)
		bad := newQuery(666, "panic.example.")
		r := exchangeOn(t, c, bad)
		if r.Id != bad.Id || r.Rcode != dns.RcodeServerFailure || len(r.Question) != 1 || r.Question[0] != bad.Question[0] {
			t.Fatalf("%s: answer to the panicking query: %v; want SERVFAIL with its ID and question", tc.proto, r)
		}
		if got := panics.Load(); got != int64(i+1) {
			t.Errorf("%s: OnPanic called %d times in all, want %d", tc.proto, got, i+1)
		}
		// The server, and on TCP the same connection, goes on serving.
		q := newQuery(7, "example.org.")
		checkEcho(t, exchangeOn(t, c, q), q, tc.proto, c.LocalAddr().String())

		entries := logs.FilterMessage("panic serving query").All()
		if len(entries) != i+1 {
			t.Fatalf("%s: %d panic log entries, want %d", tc.proto, len(entries), i+1)
		}
		fields := entries[i].ContextMap()
		if fields["client"] != c.LocalAddr().String() || fields["panic"] != "handler bug" {
			t.Errorf("%s: panic logged with %v; want the client and the panic value", tc.proto, fields)
		}
		if stack, _ := fields["stack"].(string); !strings.Contains(stack, "TestServerPanic") {
			t.Errorf("%s: logged stack does not reach the handler:\n%s", tc.proto, stack)
		}
	}
}

// Datagrams and TCP messages too short for a header are dropped, garbage is
// left to the handler, and neither stops the server.
func TestServerGarbage(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen [][]byte
	s := &Server{Handler: HandlerFunc(func(ctx context.Context, req *Request) []byte {
		mu.Lock()
		seen = append(seen, bytes.Clone(req.Raw))
		mu.Unlock()
		return echo(ctx, req)
	})}
	udpAddr, tcpAddr := startServer(t, s)
	garbage := [][]byte{{}, {1, 2, 3, 4, 5}, bytes.Repeat([]byte{0xFF}, 12), bytes.Repeat([]byte{0xFF}, 100)}

	u := dialDNS(t, "udp", udpAddr)
	for _, g := range garbage {
		if _, err := u.Write(g); err != nil {
			t.Fatalf("writing garbage: %v", err)
		}
	}
	q := newQuery(42, "example.org.")
	// Datagrams from one socket arrive in order, and the garbage got no
	// answer, so the first answer read must be this one.
	checkEcho(t, exchangeOn(t, u, q), q, "udp", u.LocalAddr().String())

	tc := dialDNS(t, "tcp", tcpAddr)
	for _, g := range garbage[1:] { // an empty TCP message would end the connection
		frame := binary.BigEndian.AppendUint16(nil, uint16(len(g)))
		if _, err := tc.Write(append(frame, g...)); err != nil {
			t.Fatalf("writing garbage: %v", err)
		}
	}
	checkEcho(t, exchangeOn(t, tc, q), q, "tcp", tc.LocalAddr().String())

	// UDP workers work concurrently, so the handler may still be busy with
	// garbage read before the query. Every datagram before it has been
	// read, though, and Shutdown waits for what was read to be served.
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, raw := range seen {
		if len(raw) < dnsmsg.HeaderLen {
			t.Errorf("handler was given %d bytes, shorter than a header", len(raw))
		}
	}
	// Both long garbage messages on both protocols, then the query twice.
	if len(seen) != 6 {
		t.Errorf("handler called %d times, want 6", len(seen))
	}
}

// Of a datagram larger than any query, cut short by the kernel, the
// handler gets the first udpReadBufLen bytes and answers by its own
// rules, whether the reader takes datagrams in batches or one at a time;
// the reader goes on.
func TestServerOversizedQueryGoesToTheHandlerCut(t *testing.T) {
	t.Parallel()
	for _, batch := range []int{1, DefaultUDPBatch} {
		t.Run(fmt.Sprintf("batch %d", batch), func(t *testing.T) {
			t.Parallel()
			var seen atomic.Int64
			udp, _ := startServer(t, &Server{UDPBatch: batch, Handler: HandlerFunc(func(ctx context.Context, req *Request) []byte {
				seen.Store(int64(len(req.Raw)))
				return echo(ctx, req)
			})})
			conn, err := net.Dial("udp", udp)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			q := pack(t, newQuery(4242, "big.example."))
			big := append(q, make([]byte, udpReadBufLen+1000)...) // trailing bytes past the question
			conn.SetReadDeadline(time.Now().Add(ioTimeout))
			buf := make([]byte, 512)
			for _, m := range [][]byte{big, q} {
				if _, err := conn.Write(m); err != nil {
					t.Fatal(err)
				}
				n, err := conn.Read(buf)
				if err != nil {
					t.Fatal(err)
				}
				var r dns.Msg
				if err := r.Unpack(buf[:n]); err != nil || r.Id != 4242 || r.Rcode != dns.RcodeSuccess {
					t.Fatalf("answer %v (%v)", r.MsgHdr, err)
				}
				if want := min(len(m), udpReadBufLen); seen.Load() != int64(want) {
					t.Fatalf("a %d-byte datagram reached the handler as %d bytes, want %d", len(m), seen.Load(), want)
				}
			}
		})
	}
}
