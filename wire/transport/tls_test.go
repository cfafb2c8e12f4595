package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// newDoT starts a DoT fake running h with a certificate from a throwaway
// CA, and returns it with a transport made by the factory the way the
// daemon makes one: dialling 127.0.0.1 for dns.test (the ip key) and
// trusting the CA's pool alone (the ca_file key, loaded).
func newDoT(tb testing.TB, h wiretest.Handler, opts ...Option) (*wiretest.DoTServer, *TLS) {
	tb.Helper()
	ca := wiretest.NewCA(tb)
	srv := wiretest.NewDoTServer(tb, ca.Certificate(tb, wiretest.TLSName, "127.0.0.1"), h)
	opts = append([]Option{WithDialIP(loopback), WithRootCAs(ca.Pool())}, opts...)
	return srv, newTestTransport(tb, srv.Upstream(), opts...).(*TLS)
}

// loopback is where the tests pin DoT and DoH fakes' name (WithDialIP).
var loopback = netip.MustParseAddr("127.0.0.1")

// newTestTransport returns NewTransport for address, parsed, with opts,
// closed at the test's end (before the fake server it talks to, started
// earlier).
func newTestTransport(tb testing.TB, address string, opts ...Option) Transport {
	tb.Helper()
	tr, err := NewTransport(mustParseAddress(tb, address), opts...)
	if err != nil {
		tb.Fatalf("NewTransport(%q): %v", address, err)
	}
	tb.Cleanup(func() { _ = tr.Close() })
	return tr
}

// mustParseAddress is ParseAddress, failing the test on an error.
func mustParseAddress(tb testing.TB, address string) Address {
	tb.Helper()
	a, err := ParseAddress(address)
	if err != nil {
		tb.Fatal(err)
	}
	return a
}

func TestTLSAnswerKeepsTheQueryID(t *testing.T) {
	t.Parallel()
	_, tr := newDoT(t, wiretest.Answer())
	checkAnswerLeavesQuery(t, tr)
}

func TestTLSReusesOneConnection(t *testing.T) {
	t.Parallel()
	srv, tr := newDoT(t, wiretest.Answer())

	for i := range 200 {
		mustAnswer(t, tr, query(fmt.Sprintf("q%d.example", i)))
	}
	if got := srv.Accepts(); got != 1 {
		t.Errorf("200 sequential exchanges took %d connections, want 1", got)
	}
	if got := srv.Queries(); got != 200 {
		t.Errorf("server saw %d queries, want 200", got)
	}
}

// Concurrent queries share the few connections allowed, and each gets its
// own answer although the server answers in another order than it was
// asked (its handlers take different times).
func TestTLSPipelinesConcurrentQueries(t *testing.T) {
	t.Parallel()
	const conns, queries = 3, 100
	srv, tr := newDoT(t, func(w *wiretest.Writer, q *dns.Msg) {
		d := time.Duration(len(q.Question[0].Name)%4) * time.Millisecond
		wiretest.Delay(d, wiretest.Answer())(w, q)
	}, WithPipelineConns(conns))

	errs := make(chan error, queries)
	for i := range queries {
		go func() {
			q := query(fmt.Sprintf("%0*d.example", 1+i%7, i)) // names of several lengths
			r, err := exchangeMsg(ctxWithin(t, answerTimeout), tr, q)
			switch {
			case err != nil:
				errs <- err
			case r.Id != q.Id || !sameQuestion(r.Question, q.Question):
				errs <- fmt.Errorf("query %d %s got the answer to %d %s", q.Id, q.Question[0].Name, r.Id, questionString(r.Question))
			case len(r.Answer) != 1 || r.Answer[0].Header().Name != q.Question[0].Name:
				errs <- fmt.Errorf("query %s got records %v", q.Question[0].Name, r.Answer)
			default:
				errs <- nil
			}
		}()
	}
	for range queries {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if got := srv.Accepts(); got < 1 || got > conns {
		t.Errorf("%d concurrent exchanges took %d connections, want 1..%d", queries, got, conns)
	}
}

// With one connection, a quick answer overtakes a slow one asked first.
func TestTLSMatchesAnswersOutOfOrder(t *testing.T) {
	t.Parallel()
	slowArrived := make(chan struct{})
	fastAnswered := make(chan struct{})
	srv, tr := newDoT(t, func(w *wiretest.Writer, q *dns.Msg) {
		if q.Question[0].Name == "slow.example." {
			close(slowArrived)
			wiretest.Gate(fastAnswered, wiretest.Answer())(w, q)
			return
		}
		wiretest.Answer()(w, q)
		close(fastAnswered)
	}, WithPipelineConns(1))

	slow := make(chan error, 1)
	go func() {
		q := query("slow.example")
		r, err := exchangeMsg(ctxWithin(t, answerTimeout), tr, q)
		if err == nil && !sameQuestion(r.Question, q.Question) {
			err = fmt.Errorf("slow query answered %s", questionString(r.Question))
		}
		slow <- err
	}()
	<-slowArrived
	mustAnswer(t, tr, query("fast.example"))
	if err := <-slow; err != nil {
		t.Errorf("slow exchange: %v", err)
	}
	if got := srv.Accepts(); got != 1 {
		t.Errorf("took %d connections, want 1", got)
	}
}

// Cancelling one of the queries on a shared connection ends that exchange
// alone: the others on the connection are answered, its late answer is
// dropped, and the connection stays in use.
func TestTLSCancelLeavesOtherQueriesAnswered(t *testing.T) {
	t.Parallel()
	received := make(chan string, 3)
	release := make(chan struct{})
	srv, tr := newDoT(t, wiretest.Notify(received, wiretest.Gate(release, wiretest.Answer())), WithPipelineConns(1))

	cancelOneOfThree(t, tr, received, release)
	mustAnswer(t, tr, query("after.example"))
	if got := srv.Accepts(); got != 1 {
		t.Errorf("took %d connections, want 1: a cancellation keeps the connection", got)
	}
}

// Answers are validated like every transport's; an answer with an ID no
// query on the connection has fails the connection.
func TestTLSValidatesAnswers(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		handler wiretest.Handler
		want    error
	}{
		{"refused", wiretest.Rcode(dns.RcodeRefused), ErrRefused},
		{"wrong question", wiretest.WrongQuestion, ErrQuestionMismatch},
		{"garbage", wiretest.Garbage, ErrMalformed},
		{"unknown ID", wiretest.WrongID, ErrIDMismatch},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, tr := newDoT(t, c.handler)
			_, err := exchangeMsg(ctxWithin(t, answerTimeout), tr, query("example.com"))
			if !errors.Is(err, c.want) {
				t.Fatalf("Exchange = %v, want %v", err, c.want)
			}
		})
	}
}

// An answer larger than any UDP buffer arrives whole.
func TestTLSCarriesLargeAnswers(t *testing.T) {
	t.Parallel()
	const records = 1000 // about 16 KB
	_, tr := newDoT(t, wiretest.Truncating(records))

	r := mustAnswer(t, tr, query("large.example"))
	if len(r.Answer) != records {
		t.Errorf("%d records, want %d", len(r.Answer), records)
	}
}

// Verification failures are errors of crypto/tls and crypto/x509 the
// caller can inspect, and never context errors.
func TestTLSVerifiesTheServer(t *testing.T) {
	t.Parallel()
	ca := wiretest.NewCA(t)
	cases := []struct {
		name  string
		cert  tls.Certificate
		roots *x509.CertPool
		want  any // a pointer to the x509 error type expected
	}{
		{"another host's certificate", ca.Certificate(t, "other.test"), ca.Pool(), new(x509.HostnameError)},
		{"an unknown CA", ca.Certificate(t, wiretest.TLSName), wiretest.NewCA(t).Pool(), new(x509.UnknownAuthorityError)},
	}
	for _, c := range cases {
		srv := wiretest.NewDoTServer(t, c.cert, wiretest.Answer())
		tr := newTestTransport(t, srv.Upstream(), WithDialIP(loopback), WithRootCAs(c.roots))
		_, err := exchangeMsg(ctxWithin(t, answerTimeout), tr, query("example.com"))
		var verr *tls.CertificateVerificationError
		if !errors.As(err, &verr) || !errors.As(err, c.want) {
			t.Errorf("%s: Exchange = %v, want a certificate verification error of type %T", c.name, err, c.want)
		}
		if isContextError(err) {
			t.Errorf("%s: %v passes for a context error", c.name, err)
		}
	}
}

func TestTLSConnectionRefused(t *testing.T) {
	t.Parallel()
	_, port, _ := net.SplitHostPort(wiretest.Refusing(t))
	tr := newTestTransport(t, "tls://"+net.JoinHostPort(wiretest.TLSName, port), WithDialIP(loopback))

	_, err := exchangeMsg(ctxWithin(t, answerTimeout), tr, query("example.com"))
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Exchange to a closed port: %v, want ECONNREFUSED", err)
	}
}

// A DoT connection's writer sends all the frames queued while it was busy
// in one write, in the order they were queued, and once a write fails no
// frame is queued any more. A pipe makes it deterministic: the writer's
// first write blocks until the server side reads, which it does only once
// every frame is queued, so ten frames take at most two writes.
func TestDoTWriterBatchesQueuedFrames(t *testing.T) {
	t.Parallel()
	ca := wiretest.NewCA(t)
	cliRaw, srvRaw := net.Pipe()
	srv := tls.Server(srvRaw, &tls.Config{Certificates: []tls.Certificate{ca.Certificate(t, wiretest.TLSName)}})
	cli := tls.Client(cliRaw, &tls.Config{RootCAs: ca.Pool(), ServerName: wiretest.TLSName})
	defer srv.Close()
	defer cli.Close()
	handshake := make(chan error, 1)
	go func() { handshake <- srv.Handshake() }()
	if err := cli.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-handshake; err != nil {
		t.Fatal(err)
	}

	c := newDotConn(&TLS{label: "tls://" + wiretest.TLSName})
	c.conn = cli
	writer := make(chan struct{})
	go func() {
		defer close(writer)
		c.writeLoop()
	}()
	ctx := &doneCounter{Context: t.Context()}
	const frames = 10
	for i := range frames {
		frame := []byte{0, 3, byte(i), 0xAA, 0xBB}
		if err := c.write(ctx, frame); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
	}
	for i := range frames {
		var got [5]byte
		if _, err := io.ReadFull(srv, got[:]); err != nil {
			t.Fatalf("reading frame %d: %v", i, err)
		}
		if want := [5]byte{0, 3, byte(i), 0xAA, 0xBB}; got != want {
			t.Fatalf("frame %d arrived as %x, want %x", i, got, want)
		}
	}
	c.wmu.Lock()
	writes := c.writes
	c.wmu.Unlock()
	if writes < 1 || writes > 2 {
		t.Errorf("%d frames took %d writes, want one or two", frames, writes)
	}

	// The server goes away: the next batch fails, and nothing more queues.
	_ = srvRaw.Close()
	if err := c.write(ctx, []byte{0, 1, 0xFF}); err != nil {
		t.Fatalf("queueing a frame: %v", err)
	}
	<-writer
	if err := c.write(ctx, []byte{0, 1, 0xFE}); err == nil {
		t.Error("a frame was queued after the writer failed")
	}
	if ctx.doneCalls.Load() != 0 {
		t.Errorf("Done called %d times, want 0", ctx.doneCalls.Load())
	}
}

// Waits on a DoT connection are ended by its reader, woken through the
// connection's read deadline: a cancelled one at the next poll, one with
// an expiry earlier than the poll the reader sleeps to at that expiry. A
// read that timed out leaves the TLS stream usable: the next exchange is
// answered on the same connection.
func TestDoTWaitsShareTheReader(t *testing.T) {
	t.Parallel()
	received := make(chan string, 8)
	answer := wiretest.Answer()
	srv, tr := newDoT(t, wiretest.Notify(received, func(w *wiretest.Writer, q *dns.Msg) {
		if strings.HasPrefix(q.Question[0].Name, "stall.") {
			wiretest.Stall(w, q)
			return
		}
		answer(w, q)
	}), WithPipelineConns(1))
	mustAnswer(t, tr, query("warm.example"))
	<-received

	// Stalled exchanges with no deadline at all: the reader sleeps to its
	// first poll.
	stall := func(ctx context.Context, name string) <-chan error {
		errc := make(chan error, 1)
		go func() {
			_, err := tr.Exchange(ctx, wireQuery(t, query(name), 4096), time.Time{})
			errc <- err
		}()
		return errc
	}
	parent, cancel := context.WithCancel(context.Background())
	cancelled := stall(parent, "stall.cancelled.example")
	<-received // registered, and the reader sleeps to its first poll
	cancel()
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v, want context.Canceled", err)
	}
	if _, err := tr.Exchange(t.Context(), wireQuery(t, query("after.example"), 4096), within(answerTimeout)); err != nil {
		t.Fatalf("exchange after the reader's timeout: %v", err)
	}
	<-received
	if got := srv.Accepts(); got != 1 {
		t.Errorf("%d connections, want the one, read past its timeout", got)
	}

	parent, cancel = context.WithCancel(context.Background())
	defer cancel()
	long := stall(parent, "stall.long.example")
	<-received // the reader sleeps to the long wait's poll
	_, err := tr.Exchange(t.Context(), wireQuery(t, query("stall.short.example"), 4096), within(cancelPoll/4))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("short wait: %v, want context.DeadlineExceeded", err)
	}
	select {
	case err := <-long:
		t.Fatalf("the long wait ended with the short one: %v", err)
	default:
	}
	cancel()
	if err := <-long; !errors.Is(err, context.Canceled) {
		t.Errorf("long wait: %v, want context.Canceled", err)
	}
}
