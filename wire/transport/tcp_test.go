package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

func TestTCPReusesOneConnection(t *testing.T) {
	t.Parallel()
	srv := wiretest.NewServer(t, wiretest.Answer())
	tr := newTestTCP(t, srv.Addr)

	for i := range 50 {
		mustAnswer(t, tr, query(fmt.Sprintf("q%d.example", i)))
	}
	if got := srv.TCPAccepts(); got != 1 {
		t.Errorf("50 sequential exchanges took %d connections, want 1", got)
	}
	if got := srv.TCPQueries(); got != 50 {
		t.Errorf("server saw %d queries, want 50", got)
	}
}

// An answer larger than any UDP buffer arrives whole over TCP.
func TestTCPCarriesLargeAnswers(t *testing.T) {
	t.Parallel()
	const records = 1000 // about 16 KB
	srv := wiretest.NewServer(t, wiretest.Truncating(records))
	tr := newTestTCP(t, srv.Addr)

	r := mustAnswer(t, tr, query("large.example"))
	if len(r.Answer) != records {
		t.Errorf("%d records, want %d", len(r.Answer), records)
	}
}

// The server closes each connection after its answer; every next exchange
// finds its pooled connection stale and redials, transparently.
func TestTCPRedialsStaleConnections(t *testing.T) {
	t.Parallel()
	srv := wiretest.NewServer(t, wiretest.Then(wiretest.Answer(), wiretest.CloseConn))
	tr := newTestTCP(t, srv.Addr)

	const n = 10
	for i := range n {
		mustAnswer(t, tr, query(fmt.Sprintf("q%d.example", i)))
	}
	if got := srv.TCPAccepts(); got != n {
		t.Errorf("%d exchanges took %d connections, want %d", n, got, n)
	}
}

// A fresh connection closed without an answer is the upstream's failure:
// no redial, the EOF is reported.
func TestTCPDoesNotRedialFreshConnections(t *testing.T) {
	t.Parallel()
	srv := wiretest.NewServer(t, wiretest.CloseConn)
	tr := newTestTCP(t, srv.Addr)

	_, err := exchangeMsg(ctxWithin(t, answerTimeout), tr, query("closed.example"))
	if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("Exchange = %v, want EOF or a reset", err)
	}
	if got := srv.TCPAccepts(); got != 1 {
		t.Errorf("took %d connections, want 1", got)
	}
}

// A stale pooled connection earns one redial, not two: when the fresh
// connection fails too, the error is the upstream's.
func TestTCPRedialsOnce(t *testing.T) {
	t.Parallel()
	var served atomic.Int64
	srv := wiretest.NewServer(t, func(w *wiretest.Writer, q *dns.Msg) {
		if served.Add(1) == 1 {
			wiretest.Answer()(w, q)
			return
		}
		w.CloseConn()
	})
	tr := newTestTCP(t, srv.Addr)

	mustAnswer(t, tr, query("first.example"))
	_, err := exchangeMsg(ctxWithin(t, answerTimeout), tr, query("second.example"))
	if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("Exchange = %v, want EOF or a reset", err)
	}
	if got := srv.TCPAccepts(); got != 2 {
		t.Errorf("took %d connections, want 2: the pooled one and one redial", got)
	}
}

// With WithMaxConns(2) and two exchanges stalled, a third waits for a
// connection instead of opening one, and its deadline ends the wait.
func TestTCPBoundsOpenConnections(t *testing.T) {
	t.Parallel()
	received := make(chan string, 2)
	release := make(chan struct{})
	srv := wiretest.NewServer(t, wiretest.Notify(received, wiretest.Gate(release, wiretest.Answer())))
	tr := newTestTCP(t, srv.Addr, WithMaxConns(2))

	done := make(chan error, 2)
	for i := range 2 {
		go func() {
			_, err := exchangeMsg(ctxWithin(t, answerTimeout), tr, query(fmt.Sprintf("held%d.example", i)))
			done <- err
		}()
	}
	<-received
	<-received

	_, err := exchangeMsg(ctxWithin(t, expiryTimeout), tr, query("third.example"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("third exchange = %v, want it to expire waiting", err)
	}
	if got := srv.TCPAccepts(); got != 2 {
		t.Errorf("%d connections opened, want 2", got)
	}

	close(release)
	for range 2 {
		if err := <-done; err != nil {
			t.Errorf("held exchange: %v", err)
		}
	}
}

// The expiry sweep closes connections idle for the idle timeout, and only
// those. Its body is called with a clock of the test's own.
func TestTCPExpiresIdleConnections(t *testing.T) {
	t.Parallel()
	srv := wiretest.NewServer(t, wiretest.Answer())
	tr := newTestTCP(t, srv.Addr, WithIdleTimeout(time.Hour))

	mustAnswer(t, tr, query("a.example"))
	tr.expireIdle(time.Now())
	if got := len(tr.idle); got != 1 {
		t.Fatalf("%d idle connections after a sweep before expiry, want 1", got)
	}
	tr.expireIdle(time.Now().Add(time.Hour))
	if got := len(tr.idle); got != 0 {
		t.Fatalf("%d idle connections after a sweep past expiry, want 0", got)
	}
	mustAnswer(t, tr, query("b.example"))
	if got := srv.TCPAccepts(); got != 2 {
		t.Errorf("%d connections, want 2: the expired one was closed", got)
	}
}

func TestTCPConnectionRefused(t *testing.T) {
	t.Parallel()
	tr := newTestTCP(t, wiretest.Refusing(t))

	_, err := exchangeMsg(ctxWithin(t, answerTimeout), tr, query("example.com"))
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Exchange to a closed port: %v, want ECONNREFUSED", err)
	}
}

func TestTCPCloseReleasesIdleConnections(t *testing.T) {
	t.Parallel()
	srv := wiretest.NewServer(t, wiretest.Answer())
	tr := NewTCP(srv.Addr)

	mustAnswer(t, tr, query("a.example"))
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if got := len(tr.idle); got != 0 {
		t.Errorf("%d idle connections after Close, want 0", got)
	}
	mustAnswer(t, tr, query("b.example")) // still works, keeps nothing
	if got := len(tr.idle); got != 0 {
		t.Errorf("%d idle connections kept after Close, want 0", got)
	}
}

// BenchmarkTCPExchange compares reusing sockets (the default) with a fresh one
// per exchange (WithMaxIdle(0)), which is what reuse has to beat.
func BenchmarkTCPExchange(b *testing.B) {
	benchmarkReuse(b, func(tb testing.TB, addr string, opts ...Option) Exchanger { return newTestTCP(tb, addr, opts...) })
}
