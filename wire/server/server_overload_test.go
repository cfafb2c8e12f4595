package server

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// Past MaxConcurrentQueries queries are refused at once, over UDP and TCP
// alike, and a flood does not grow the number of goroutines; the admitted
// ones are answered once the handler lets go.
//
// Not parallel: it counts the process's goroutines.
func TestServerOverload(t *testing.T) {
	const limit, flood = 4, 40
	entered := make(chan struct{}, flood)
	release := make(chan struct{})
	var overloads atomic.Int64
	s := &Server{
		Handler: HandlerFunc(func(ctx context.Context, req *Request) []byte {
			if binary.BigEndian.Uint16(req.Raw) < flood { // the flood's IDs
				entered <- struct{}{}
				<-release
			}
			return echo(ctx, req)
		}),
		MaxConcurrentQueries: limit,
		OnOverload:           func([]byte, string, netip.AddrPort) { overloads.Add(1) },
	}
	udpAddr, tcpAddr := startServer(t, s)
	unblock := sync.OnceFunc(func() { close(release) })
	t.Cleanup(unblock)
	baseline := runtime.NumGoroutine()

	udp, err := net.Dial("udp", udpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	for id := range uint16(flood) {
		if _, err := udp.Write(pack(t, newQuery(id, "example.org."))); err != nil {
			t.Fatal(err)
		}
	}

	refused := map[uint16]bool{}
	dc := &dns.Conn{Conn: udp}
	udp.SetReadDeadline(time.Now().Add(ioTimeout))
	for len(refused) < flood-limit {
		r, err := dc.ReadMsg()
		if err != nil {
			t.Fatalf("after %d REFUSED: %v", len(refused), err)
		}
		if r.Rcode != dns.RcodeRefused || len(r.Question) != 1 {
			t.Fatalf("answer %d while the handler is blocked: %s with %d questions; want REFUSED with the question",
				r.Id, dns.RcodeToString[r.Rcode], len(r.Question))
		}
		refused[r.Id] = true
	}
	for range limit {
		select {
		case <-entered:
		case <-time.After(ioTimeout):
			t.Fatal("fewer queries than the limit reached the handler")
		}
	}
	// The limit is shared: TCP is full too.
	tcp := dialDNS(t, "tcp", tcpAddr)
	if r := exchangeOn(t, tcp, newQuery(1000, "example.org.")); r.Rcode != dns.RcodeRefused {
		t.Fatalf("tcp query at the limit: %s, want REFUSED", dns.RcodeToString[r.Rcode])
	}
	if got, want := overloads.Load(), int64(flood-limit+1); got != want {
		t.Errorf("OnOverload called %d times, want %d", got, want)
	}
	// One goroutine per admitted query and one for the TCP connection;
	// the refused ones cost none. The slack absorbs the runtime's own
	// comings and goings.
	const slack = 4
	if g := runtime.NumGoroutine(); g > baseline+limit+1+slack {
		t.Errorf("%d goroutines with %d queries admitted and one TCP client, baseline %d", g, limit, baseline)
	}

	unblock()
	answered := 0
	for answered < limit {
		r, err := dc.ReadMsg()
		if err != nil {
			t.Fatalf("after %d admitted answers: %v", answered, err)
		}
		if r.Rcode != dns.RcodeSuccess || refused[r.Id] {
			t.Fatalf("answer %d: %s (refused before: %v)", r.Id, dns.RcodeToString[r.Rcode], refused[r.Id])
		}
		answered++
	}
}

// UDP workers outlive their query, so a burst leaves idle ones behind; the
// reaper ends those beyond what was in flight at once during a whole period,
// and the server answers as before with the workers it starts again.
func TestServerReapsIdleUDPWorkers(t *testing.T) {
	const burst = 8
	entered := make(chan struct{}, burst)
	release := make(chan struct{})
	reaped := make(chan struct{}, 1)
	s := &Server{
		Handler: HandlerFunc(func(ctx context.Context, req *Request) []byte {
			if binary.BigEndian.Uint16(req.Raw) < burst {
				entered <- struct{}{}
				<-release
			}
			return echo(ctx, req)
		}),
		reapEvery: 5 * time.Millisecond,
		reaped: func() {
			select {
			case reaped <- struct{}{}:
			default:
			}
		},
	}
	udpAddr, _ := startServer(t, s)
	unblock := sync.OnceFunc(func() { close(release) })
	t.Cleanup(unblock)

	c := dialDNS(t, "udp", udpAddr)
	for id := range uint16(burst) {
		if err := c.WriteMsg(newQuery(id, "example.org.")); err != nil {
			t.Fatal(err)
		}
	}
	for range burst {
		select {
		case <-entered:
		case <-time.After(ioTimeout):
			t.Fatal("the burst did not reach the handler at once")
		}
	}
	// Every query holds a worker: the reaper must leave them all.
	<-reaped
	<-reaped
	if got := s.workers.Load(); got != burst {
		t.Fatalf("%d UDP workers while %d queries are in flight, want %d", got, burst, burst)
	}
	unblock()
	c.SetReadDeadline(time.Now().Add(ioTimeout))
	for range burst {
		if _, err := c.ReadMsg(); err != nil {
			t.Fatal(err)
		}
	}

	limit := time.After(ioTimeout)
	for s.workers.Load() > 0 {
		select {
		case <-reaped:
		case <-limit:
			t.Fatalf("%d idle UDP workers left after %v", s.workers.Load(), ioTimeout)
		}
	}
	r := exchangeOn(t, c, newQuery(100, "example.org."))
	checkEcho(t, r, newQuery(100, "example.org."), "udp", c.LocalAddr().String())
}
