package server

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// Shutdown stops listening and closes idle connections at once, but waits
// for queries in flight, whose answers still reach their clients.
func TestServerShutdownInFlight(t *testing.T) {
	t.Parallel()
	entered := make(chan string, 2)
	release := make(chan struct{})
	s := &Server{Handler: HandlerFunc(func(ctx context.Context, req *Request) []byte {
		if req.Raw[1] == 1 { // ID 1: the queries to hold
			entered <- req.Proto
			<-release
		}
		return echo(ctx, req)
	})}
	udpAddr, tcpAddr := startServer(t, s)
	unblock := sync.OnceFunc(func() { close(release) })
	t.Cleanup(unblock)

	idle := dialDNS(t, "tcp", tcpAddr)
	if r := exchangeOn(t, idle, newQuery(2, "example.org.")); r.Id != 2 {
		t.Fatalf("answer ID %d, want 2", r.Id)
	}
	held := map[string]*dns.Conn{"udp": dialDNS(t, "udp", udpAddr), "tcp": dialDNS(t, "tcp", tcpAddr)}
	q := newQuery(1, "example.org.")
	for _, c := range held {
		c.SetDeadline(time.Now().Add(ioTimeout))
		if err := c.WriteMsg(q); err != nil {
			t.Fatal(err)
		}
	}
	for range held {
		select {
		case <-entered:
		case <-time.After(ioTimeout):
			t.Fatal("the held queries did not reach the handler")
		}
	}

	shutdown := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		shutdown <- s.Shutdown(ctx)
	}()
	if err := awaitClosed(idle.Conn, ioTimeout); err != nil {
		t.Fatalf("idle connection during Shutdown: %v", err)
	}
	// Shutdown closes the listeners before the idle connections.
	if c, err := net.DialTimeout("tcp", tcpAddr, ioTimeout); err == nil {
		c.Close()
		t.Fatal("new connection accepted during Shutdown")
	}
	select {
	case err := <-shutdown:
		t.Fatalf("Shutdown returned %v with queries in flight", err)
	default:
	}

	unblock()
	for proto, c := range held {
		r, err := c.ReadMsg()
		if err != nil {
			t.Fatalf("%s: answer in flight at Shutdown: %v", proto, err)
		}
		checkEcho(t, r, q, proto, c.LocalAddr().String())
	}
	select {
	case err := <-shutdown:
		if err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
	case <-time.After(ioTimeout):
		t.Fatal("Shutdown did not return once the queries were answered")
	}
	if err := awaitClosed(held["tcp"].Conn, ioTimeout); err != nil {
		t.Errorf("tcp connection after Shutdown: %v", err)
	}

	// Nothing is served any more.
	if c, err := net.DialTimeout("tcp", tcpAddr, ioTimeout); err == nil {
		c.Close()
		t.Error("new connection accepted after Shutdown")
	}
	u := dialDNS(t, "udp", udpAddr)
	u.SetDeadline(time.Now().Add(ioTimeout))
	if err := u.WriteMsg(q); err == nil {
		if _, err := u.ReadMsg(); err == nil {
			t.Error("udp query answered after Shutdown")
		}
	}
}

// When Shutdown's context expires first, the handlers' context is
// cancelled, and Shutdown returns the context's error once they are done.
func TestServerShutdownDeadline(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{}, 2)
	cancelled := make(chan error, 2)
	s := &Server{Handler: HandlerFunc(func(ctx context.Context, req *Request) []byte {
		entered <- struct{}{}
		<-ctx.Done()
		cancelled <- ctx.Err()
		return nil
	})}
	udpAddr, tcpAddr := startServer(t, s)
	for _, c := range []*dns.Conn{dialDNS(t, "udp", udpAddr), dialDNS(t, "tcp", tcpAddr)} {
		if err := c.WriteMsg(newQuery(1, "example.org.")); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		<-entered
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want %v", err, context.DeadlineExceeded)
	}
	for range 2 {
		// Shutdown waited for the handlers: their reports are there.
		select {
		case err := <-cancelled:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("handler context ended with %v, want %v", err, context.Canceled)
			}
		default:
			t.Fatal("Shutdown returned before its handlers")
		}
	}
}

func TestServerShutdownBeforeStart(t *testing.T) {
	t.Parallel()
	s := &Server{Handler: HandlerFunc(echo), Listen: []string{"127.0.0.1:0"}}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown before Start: %v", err)
	}
	if err := s.Start(); err == nil {
		s.Shutdown(context.Background())
		t.Fatal("Start after Shutdown succeeded")
	}
}
