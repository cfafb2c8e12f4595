package transport

// The life of DoT connections: retired after a stall, redialled after the
// server closed them, expired when idle, closed by Close.

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// connCounts returns the connections new exchanges may use and those
// whose reader runs.
func connCounts(tr *TLS) (usable, open int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.conns), len(tr.open)
}

// A server that accepts a query and never answers lets the exchange expire
// with its deadline; the connection is retired, and the next query dials.
func TestTLSStalledQueryRetiresTheConnection(t *testing.T) {
	t.Parallel()
	srv, tr := newDoT(t, func(w *wiretest.Writer, q *dns.Msg) {
		if q.Question[0].Name == "stalled.example." {
			wiretest.Stall(w, q)
			return
		}
		wiretest.Answer()(w, q)
	})

	// The connection is up before the stall: the short deadline covers
	// the wait for an answer, not a handshake on a loaded machine.
	mustAnswer(t, tr, query("first.example"))
	_, err := exchangeMsg(ctxWithin(t, expiryTimeout), tr, query("stalled.example"))
	if !isExpiry(err) {
		t.Fatalf("Exchange with a stalled server = %v, want an expiry", err)
	}
	mustAnswer(t, tr, query("next.example"))
	if got := srv.Accepts(); got != 2 {
		t.Errorf("took %d connections, want 2: the stalled one is not reused", got)
	}
}

// A server that accepts the TCP connection and never completes the
// handshake: the context bounds connection set-up too.
func TestTLSStalledHandshakeExpires(t *testing.T) {
	t.Parallel()
	bh := wiretest.NewBlackhole(t)
	_, port, _ := net.SplitHostPort(bh.Addr)
	tr := newTestTransport(t, "tls://"+net.JoinHostPort(wiretest.TLSName, port), WithDialIP(loopback)).(*TLS)

	for range 2 {
		if _, err := exchangeMsg(ctxWithin(t, expiryTimeout), tr, query("stalled.example")); !isExpiry(err) {
			t.Fatalf("Exchange with a stalled handshake = %v, want an expiry", err)
		}
	}
	if n, open := connCounts(tr); n != 0 || open != 0 {
		t.Errorf("%d usable and %d open connections, want none: a failed dial is not kept", n, open)
	}
}

// The server closes its connections between queries; every next query
// dials again, transparently, whether or not the transport has noticed the
// close by then.
func TestTLSRedialsConnectionsTheServerClosed(t *testing.T) {
	t.Parallel()
	srv, tr := newDoT(t, wiretest.Answer())

	const n = 10
	for i := range n {
		mustAnswer(t, tr, query(fmt.Sprintf("q%d.example", i)))
		srv.CloseConns()
	}
	if got := srv.Accepts(); got != n {
		t.Errorf("%d exchanges took %d connections, want %d", n, got, n)
	}
}

// The server closes a reused connection as the query arrives, before any
// answer: the query is redialled, not failed.
func TestTLSRedialsAReusedConnectionClosedBeforeTheAnswer(t *testing.T) {
	t.Parallel()
	var served atomic.Int64
	srv, tr := newDoT(t, func(w *wiretest.Writer, q *dns.Msg) {
		if served.Add(1) == 2 {
			w.CloseConn()
			return
		}
		wiretest.Answer()(w, q)
	})

	mustAnswer(t, tr, query("first.example"))
	mustAnswer(t, tr, query("second.example"))
	if got := srv.Accepts(); got != 2 {
		t.Errorf("took %d connections, want 2: the reused one and one redial", got)
	}
}

// A connection dialled for the query and closed without an answer is the
// upstream's failure: no redial.
func TestTLSDoesNotRedialFreshConnections(t *testing.T) {
	t.Parallel()
	srv, tr := newDoT(t, wiretest.CloseConn)

	_, err := exchangeMsg(ctxWithin(t, answerTimeout), tr, query("closed.example"))
	if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("Exchange = %v, want EOF or a reset", err)
	}
	if got := srv.Accepts(); got != 1 {
		t.Errorf("took %d connections, want 1", got)
	}
}

// The idle sweep closes connections idle for the idle timeout, and only
// those. Its body is called with a clock of the test's own.
func TestTLSExpiresIdleConnections(t *testing.T) {
	t.Parallel()
	srv, tr := newDoT(t, wiretest.Answer(), WithIdleTimeout(time.Hour))

	mustAnswer(t, tr, query("a.example"))
	tr.expireIdle(time.Now())
	if got, _ := connCounts(tr); got != 1 {
		t.Fatalf("%d connections after a sweep before expiry, want 1", got)
	}
	tr.expireIdle(time.Now().Add(time.Hour))
	if got, _ := connCounts(tr); got != 0 {
		t.Fatalf("%d connections after a sweep past expiry, want 0", got)
	}
	mustAnswer(t, tr, query("b.example"))
	if got := srv.Accepts(); got != 2 {
		t.Errorf("%d connections, want 2: the expired one was closed", got)
	}
}

// Close closes idle connections and waits for their readers; exchanges
// after it still work and keep nothing.
func TestTLSCloseReleasesConnections(t *testing.T) {
	t.Parallel()
	_, tr := newDoT(t, wiretest.Answer())

	mustAnswer(t, tr, query("a.example"))
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if n, open := connCounts(tr); n != 0 || open != 0 {
		t.Errorf("after Close: %d usable and %d open connections, want none", n, open)
	}
	mustAnswer(t, tr, query("b.example"))
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if n, open := connCounts(tr); n != 0 || open != 0 {
		t.Errorf("after an exchange past Close: %d usable and %d open connections, want none", n, open)
	}
}
