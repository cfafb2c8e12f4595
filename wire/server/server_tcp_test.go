package server

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// dialTCP opens a raw client connection, closed when the test ends.
func dialTCP(tb testing.TB, addr string) net.Conn {
	tb.Helper()
	return dialDNS(tb, "tcp", addr).Conn
}

// Pipelined queries on one connection are all in the handler at once, and
// every one is answered.
func TestServerTCPPipelining(t *testing.T) {
	t.Parallel()
	const n = 10
	arrived := make(chan uint16, n)
	release := make(chan struct{})
	s := &Server{Handler: HandlerFunc(func(ctx context.Context, req *Request) []byte {
		arrived <- binary.BigEndian.Uint16(req.Raw)
		<-release
		return echo(ctx, req)
	})}
	_, tcpAddr := startServer(t, s)
	unblock := sync.OnceFunc(func() { close(release) })
	t.Cleanup(unblock)

	c := dialTCP(t, tcpAddr)
	var frames []byte
	want := map[uint16]bool{}
	for id := range uint16(n) {
		b := pack(t, newQuery(100+id, "example.org."))
		frames = binary.BigEndian.AppendUint16(frames, uint16(len(b)))
		frames = append(frames, b...)
		want[100+id] = true
	}
	c.SetDeadline(time.Now().Add(ioTimeout))
	if _, err := c.Write(frames); err != nil { // one write: all queries in flight at once
		t.Fatal(err)
	}
	for range n {
		select {
		case id := <-arrived:
			if !want[id] {
				t.Fatalf("handler got unexpected ID %d", id)
			}
		case <-time.After(ioTimeout):
			t.Fatal("the pipelined queries were not all served at once")
		}
	}
	unblock()

	dc := &dns.Conn{Conn: c}
	for range n {
		r, err := dc.ReadMsg()
		if err != nil {
			t.Fatalf("reading answers: %v", err)
		}
		if !want[r.Id] || r.Rcode != dns.RcodeSuccess {
			t.Fatalf("unexpected answer %d (%s)", r.Id, dns.RcodeToString[r.Rcode])
		}
		delete(want, r.Id)
	}
}

// A client that has not delivered a whole query within the idle timeout is
// disconnected, however it paces its bytes, while other clients are served.
func TestServerTCPIdleTimeout(t *testing.T) {
	t.Parallel()
	const idle = 100 * time.Millisecond
	udpAddr, tcpAddr := startServer(t, &Server{Handler: HandlerFunc(echo), TCPIdleTimeout: idle})

	start := time.Now()
	trickler := dialTCP(t, tcpAddr)
	liar := dialTCP(t, tcpAddr)
	if _, err := trickler.Write([]byte{0}); err != nil { // half a length prefix
		t.Fatal(err)
	}
	if _, err := liar.Write([]byte{0, 40, 1, 2, 3}); err != nil { // 40 announced, 3 sent
		t.Fatal(err)
	}
	type closed struct {
		name  string
		after time.Duration
		err   error
	}
	closedc := make(chan closed, 2)
	for name, c := range map[string]net.Conn{"trickler": trickler, "liar": liar} {
		go func() {
			err := awaitClosed(c, ioTimeout)
			closedc <- closed{name, time.Since(start), err}
		}()
	}

	// Other clients are answered all the while.
	rounds := 0
	for pending := 2; pending > 0; {
		select {
		case cl := <-closedc:
			if cl.err != nil {
				t.Fatalf("%s: %v", cl.name, cl.err)
			}
			if cl.after < idle {
				t.Errorf("%s disconnected after %v, before the idle timeout", cl.name, cl.after)
			}
			pending--
			continue
		default:
		}
		q := newQuery(uint16(rounds), "example.org.")
		if r := exchange(t, "udp", udpAddr, q); r.Id != q.Id {
			t.Fatalf("udp answer ID %d, want %d", r.Id, q.Id)
		}
		if r := exchange(t, "tcp", tcpAddr, q); r.Id != q.Id {
			t.Fatalf("tcp answer ID %d, want %d", r.Id, q.Id)
		}
		rounds++
	}
	if rounds == 0 {
		t.Error("no query was served while the idle clients were connected")
	}
}

// A zero-length message closes the connection.
func TestServerTCPZeroLength(t *testing.T) {
	t.Parallel()
	_, tcpAddr := startServer(t, &Server{Handler: HandlerFunc(echo)})
	c := dialTCP(t, tcpAddr)
	if _, err := c.Write([]byte{0, 0}); err != nil {
		t.Fatal(err)
	}
	if err := awaitClosed(c, ioTimeout); err != nil {
		t.Fatal(err)
	}
}

func TestServerMaxTCPConnections(t *testing.T) {
	t.Parallel()
	_, tcpAddr := startServer(t, &Server{Handler: HandlerFunc(echo), MaxTCPConnections: 2})

	var open []*dns.Conn
	for i := range 2 {
		c := dialDNS(t, "tcp", tcpAddr)
		// An answer proves the server has taken the connection on.
		if r := exchangeOn(t, c, newQuery(uint16(i), "example.org.")); r.Id != uint16(i) {
			t.Fatalf("answer ID %d, want %d", r.Id, i)
		}
		open = append(open, c)
	}
	if err := awaitClosed(dialTCP(t, tcpAddr), ioTimeout); err != nil {
		t.Fatalf("third connection: %v", err)
	}

	// Closing one frees its place once the server has seen it go; until
	// then new connections keep being turned away.
	open[0].Close()
	deadline := time.Now().Add(ioTimeout)
	for attempt := 1; ; attempt++ {
		c := dialDNS(t, "tcp", tcpAddr)
		c.SetDeadline(deadline)
		var r *dns.Msg
		err := c.WriteMsg(newQuery(9, "example.org."))
		if err == nil {
			r, err = c.ReadMsg()
		}
		c.Close()
		if err == nil && r.Id == 9 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connection served after closing one (%d attempts, last: %v)", attempt, err)
		}
	}
	// The survivor was never disturbed.
	if r := exchangeOn(t, open[1], newQuery(10, "example.org.")); r.Id != 10 {
		t.Fatalf("answer ID %d, want 10", r.Id)
	}
}
