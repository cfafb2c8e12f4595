package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// udpKinds are the two ways a UDP transport opens a socket per exchange:
// the poller (Linux's) and the dialer (every platform's). The tests of
// behaviour run against both.
var udpKinds = []struct {
	name string
	new  func(tb testing.TB, addr string) *UDP
}{
	{"poller", func(tb testing.TB, addr string) *UDP { return newTestUDP(tb, addr) }},
	{"dialer", newDialerUDP},
}

// eachUDPKind runs test as a parallel subtest with each kind of UDP
// transport, given the constructor of that kind.
func eachUDPKind(t *testing.T, test func(t *testing.T, newUDP func(testing.TB, string) *UDP)) {
	for _, kind := range udpKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			test(t, kind.new)
		})
	}
}

// newDialerUDP is newTestUDP with every exchange through the dialer.
func newDialerUDP(tb testing.TB, addr string) *UDP {
	tb.Helper()
	u := newTestUDP(tb, addr)
	u.portable = true
	return u
}

// inFlight is the number of u's exchanges with a socket open.
func inFlight(u *UDP) int {
	n := u.dialer.inFlight()
	if p := u.poller.Load(); p != nil {
		n += p.inFlight()
	}
	return n
}

func TestUDPAnswerKeepsTheQueryID(t *testing.T) {
	t.Parallel()
	eachUDPKind(t, func(t *testing.T, newUDP func(testing.TB, string) *UDP) {
		srv := wiretest.NewServer(t, wiretest.Answer())
		u := newUDP(t, srv.Addr)
		checkAnswerLeavesQuery(t, u)
		if got := srv.UDPQueries(); got != 1 {
			t.Errorf("server saw %d UDP queries, want 1", got)
		}
		if got := srv.TCPQueries(); got != 0 {
			t.Errorf("server saw %d TCP queries, want 0", got)
		}
	})
}

func TestUDPTruncatedAnswerIsRetriedOverTCP(t *testing.T) {
	t.Parallel()
	const records = 100 // about 1.6 KB: more than a 512-byte answer holds
	srv := wiretest.NewServer(t, wiretest.Truncating(records))
	u := newTestUDP(t, srv.Addr)

	r := mustAnswer(t, u, wiretest.Query("big.example", dns.TypeA))
	if r.Truncated || len(r.Answer) != records {
		t.Errorf("answer TC=%v with %d records, want the whole %d", r.Truncated, len(r.Answer), records)
	}
	if udp, tcp := srv.UDPQueries(), srv.TCPQueries(); udp != 1 || tcp != 1 {
		t.Errorf("server saw %d UDP and %d TCP queries, want 1 and 1", udp, tcp)
	}
}

// A truncated answer that does not even parse (records cut in half) is
// still our answer, truncated: TCP carries the whole one.
func TestUDPUnparsableTruncatedAnswerIsRetriedOverTCP(t *testing.T) {
	t.Parallel()
	cutShort := func(w *wiretest.Writer, q *dns.Msg) {
		r := new(dns.Msg).SetReply(q)
		r.Truncated = true
		r.Answer = []dns.RR{wiretest.A(q.Question[0].Name, 0)}
		b, err := r.Pack()
		if err != nil {
			panic(err) // a fixed message: cannot fail
		}
		w.WriteRaw(b[:len(b)-2])
	}
	srv := wiretest.NewServer(t, wiretest.ByProto(cutShort, wiretest.Answer()))
	u := newTestUDP(t, srv.Addr)

	r := mustAnswer(t, u, wiretest.Query("cut.example", dns.TypeA))
	if r.Truncated || len(r.Answer) != 1 {
		t.Errorf("answer TC=%v with %d records, want the whole answer from TCP", r.Truncated, len(r.Answer))
	}
	if tcp := srv.TCPQueries(); tcp != 1 {
		t.Errorf("server saw %d TCP queries, want 1", tcp)
	}
}

func TestUDPConnectionRefused(t *testing.T) {
	t.Parallel()
	eachUDPKind(t, func(t *testing.T, newUDP func(testing.TB, string) *UDP) {
		u := newUDP(t, wiretest.Refusing(t))
		_, err := exchangeMsg(ctxWithin(t, answerTimeout), u, query("example.com"))
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("Exchange to a closed port: %v, want ECONNREFUSED", err)
		}
	})
}

// Every exchange has a socket of its own, closed when it ends (RFC 5452
// section 9.2): no source port carries two queries. Before issue 16, 50
// exchanges shared one socket.
func TestUDPSocketPerExchange(t *testing.T) {
	t.Parallel()
	eachUDPKind(t, func(t *testing.T, newUDP func(testing.TB, string) *UDP) {
		srv := wiretest.NewServer(t, wiretest.Answer())
		u := newUDP(t, srv.Addr)
		for i := range 50 {
			mustAnswer(t, u, query(fmt.Sprintf("q%d.example", i)))
		}
		if got := u.dials.Load(); got != 50 {
			t.Errorf("50 sequential exchanges opened %d sockets, want 50", got)
		}
		if n := inFlight(u); n != 0 {
			t.Errorf("%d sockets open after the exchanges ended, want 0", n)
		}
		if got := srv.UDPQueries(); got != 50 {
			t.Errorf("server saw %d queries, want 50", got)
		}
	})
}

// An answer that comes after its exchange expired finds its socket
// closed: it cannot pass for the next exchange's answer.
func TestUDPLateAnswerIsDropped(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	lateSent := make(chan struct{})
	late := wiretest.Gate(release, wiretest.Then(wiretest.Answer(), func(*wiretest.Writer, *dns.Msg) { close(lateSent) }))
	srv := wiretest.NewServer(t, func(w *wiretest.Writer, q *dns.Msg) {
		if q.Question[0].Name == "slow.example." {
			late(w, q)
			return
		}
		wiretest.Answer()(w, q)
	})
	u := newTestUDP(t, srv.Addr)

	_, err := exchangeMsg(ctxWithin(t, expiryTimeout), u, query("slow.example"))
	if !isExpiry(err) {
		t.Fatalf("stalled exchange: %v, want a deadline error", err)
	}
	close(release)
	<-lateSent

	r := mustAnswer(t, u, query("fast.example"))
	if r.Question[0].Name != "fast.example." {
		t.Errorf("answer for %s, want fast.example.", r.Question[0].Name)
	}
}

// A datagram without the exchange's ID (a forged one, a stray) is dropped
// and the exchange goes on waiting: it expires (which the pool records
// against the upstream), or takes the answer that comes after it.
func TestUDPUnknownIDIsDropped(t *testing.T) {
	t.Parallel()
	eachUDPKind(t, func(t *testing.T, newUDP func(testing.TB, string) *UDP) {
		srv := wiretest.NewServer(t, wiretest.WrongID)
		u := newUDP(t, srv.Addr)
		_, err := exchangeMsg(ctxWithin(t, expiryTimeout), u, query("lie.example"))
		if !isExpiry(err) {
			t.Fatalf("exchange with an upstream answering wrong IDs: %v, want an expiry", err)
		}

		wrongThenRight := func(w *wiretest.Writer, q *dns.Msg) {
			wiretest.WrongID(w, q)
			wiretest.Answer()(w, q)
		}
		srv2 := wiretest.NewServer(t, wrongThenRight)
		u2 := newUDP(t, srv2.Addr)
		mustAnswer(t, u2, query("right.example"))
	})
}

// An upstream that answers twice sends the duplicate to a socket already
// closed; the next exchange, on its own socket, gets its own answer.
func TestUDPDuplicateAnswerGoesNowhere(t *testing.T) {
	t.Parallel()
	sentTwice := make(chan struct{})
	srv := wiretest.NewServer(t, func(w *wiretest.Writer, q *dns.Msg) {
		wiretest.Answer()(w, q)
		if q.Question[0].Name == "twice.example." {
			wiretest.Answer()(w, q)
			close(sentTwice)
		}
	})
	u := newTestUDP(t, srv.Addr)

	mustAnswer(t, u, query("twice.example"))
	<-sentTwice
	mustAnswer(t, u, query("next.example"))
}

func TestUDPConcurrentExchangesGetTheirOwnAnswers(t *testing.T) {
	t.Parallel()
	eachUDPKind(t, testConcurrentExchanges)
}

func testConcurrentExchanges(t *testing.T, newUDP func(testing.TB, string) *UDP) {
	const n = 200
	srv := wiretest.NewServer(t, wiretest.Answer())
	u := newUDP(t, srv.Addr)

	errs := make(chan error, n)
	for i := range n {
		go func() {
			q := query(fmt.Sprintf("q%d.example", i))
			r, err := exchangeMsg(ctxWithin(t, answerTimeout), u, q)
			switch {
			case err != nil:
				errs <- err
			case r.Id != q.Id || !sameQuestion(r.Question, q.Question) || len(r.Answer) != 1 ||
				r.Answer[0].Header().Name != q.Question[0].Name:
				errs <- fmt.Errorf("query %d %s got answer %d %v", q.Id, q.Question[0].Name, r.Id, r.Answer)
			default:
				errs <- nil
			}
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if got := srv.UDPQueries(); got != n {
		t.Errorf("server saw %d queries, want %d", got, n)
	}
	if got := u.dials.Load(); got != n {
		t.Errorf("%d concurrent exchanges opened %d sockets, want one each", n, got)
	}
}

func TestUDPCloseStopsItsSockets(t *testing.T) {
	t.Parallel()
	eachUDPKind(t, func(t *testing.T, newUDP func(testing.TB, string) *UDP) {
		srv := wiretest.NewServer(t, wiretest.Answer())
		u := newUDP(t, srv.Addr)

		mustAnswer(t, u, query("a.example"))
		if err := u.Close(); err != nil {
			t.Fatal(err)
		}
		if n := inFlight(u); n != 0 {
			t.Errorf("%d sockets open after Close, want 0", n)
		}
		// The poller's goroutine is gone (goleak checks at the
		// end); later exchanges fail.
		if _, err := exchangeMsg(ctxWithin(t, answerTimeout), u, query("b.example")); !errors.Is(err, net.ErrClosed) {
			t.Errorf("exchange after Close: %v, want net.ErrClosed", err)
		}
	})
}

// A Close while exchanges wait fails them at once, and returns.
func TestUDPCloseFailsWaitingExchanges(t *testing.T) {
	t.Parallel()
	eachUDPKind(t, func(t *testing.T, newUDP func(testing.TB, string) *UDP) {
		const waiting = 3
		received := make(chan string, waiting)
		srv := wiretest.NewServer(t, wiretest.Notify(received, wiretest.Stall))
		u := newUDP(t, srv.Addr)
		errs := make(chan error, waiting)
		for i := range waiting {
			go func() {
				_, err := exchangeMsg(ctxWithin(t, time.Hour), u, query(fmt.Sprintf("stall%d.example", i)))
				errs <- err
			}()
		}
		for range waiting {
			<-received
		}
		_ = u.Close()
		for range waiting {
			if err := <-errs; !errors.Is(err, net.ErrClosed) {
				t.Errorf("exchange when Close came: %v, want net.ErrClosed", err)
			}
		}
	})
}

// A datagram shorter than a header is malformed, whatever its first bytes.
func TestUDPShortDatagramIsMalformed(t *testing.T) {
	t.Parallel()
	srv := wiretest.NewServer(t, func(w *wiretest.Writer, q *dns.Msg) {
		b := make([]byte, 4)
		binary.BigEndian.PutUint16(b, q.Id)
		b[2] = 0x82 // QR and TC: must not pass for a truncated answer
		w.WriteRaw(b)
	})
	u := newTestUDP(t, srv.Addr)

	_, err := exchangeMsg(ctxWithin(t, answerTimeout), u, query("short.example"))
	if !errors.Is(err, ErrMalformed) {
		t.Fatalf("4-byte answer: %v, want ErrMalformed", err)
	}
	if tcp := srv.TCPQueries(); tcp != 0 {
		t.Errorf("server saw %d TCP queries, want 0", tcp)
	}
}

// Many exchanges at once, with answers that come at once, late (after
// their exchange expired) and twice: every exchange gets its own answer or
// its own expiry, never another's, and when they are over no socket is
// left open.
func TestUDPSocketsUnderLoad(t *testing.T) {
	t.Parallel()
	eachUDPKind(t, testSocketsUnderLoad)
}

func testSocketsUnderLoad(t *testing.T, newUDP func(testing.TB, string) *UDP) {
	var mu sync.Mutex
	late := map[string]chan struct{}{} // the late names' releases
	srv := wiretest.NewServer(t, func(w *wiretest.Writer, q *dns.Msg) {
		name := q.Question[0].Name
		switch {
		case strings.HasPrefix(name, "late"):
			mu.Lock()
			release := late[name]
			mu.Unlock()
			<-release
			wiretest.Answer()(w, q)
		case strings.HasPrefix(name, "twice"):
			wiretest.Answer()(w, q)
			wiretest.Answer()(w, q)
		default:
			wiretest.Answer()(w, q)
		}
	})
	u := newUDP(t, srv.Addr)

	const workers, each = 16, 60
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for g := range workers {
		wg.Go(func() {
			for i := range each {
				kind := [...]string{"q", "late", "twice"}[i%3]
				name := fmt.Sprintf("%s-%d-%d.example.", kind, g, i)
				timeout := answerTimeout
				if kind == "late" {
					mu.Lock()
					late[name] = make(chan struct{})
					mu.Unlock()
					timeout = expiryTimeout
				}
				q := query(name)
				r, err := exchangeMsg(ctxWithin(t, timeout), u, q)
				if kind == "late" {
					mu.Lock()
					close(late[name]) // its answer now comes, after the expiry
					mu.Unlock()
					if !isExpiry(err) {
						errs <- fmt.Errorf("%s: %v, want an expiry", name, err)
					}
					continue
				}
				switch {
				case err != nil:
					errs <- fmt.Errorf("%s: %w", name, err)
				case r.Id != q.Id || r.Question[0].Name != name || len(r.Answer) != 1 || r.Answer[0].Header().Name != name:
					errs <- fmt.Errorf("%s: got the answer %v", name, r)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := inFlight(u); n != 0 {
		t.Errorf("%d sockets open after every exchange ended, want 0", n)
	}
	// Every exchange answered had a socket of its own; a late one may
	// have expired before it opened one.
	if d := u.dials.Load(); d < workers*each*2/3 || d > workers*each {
		t.Errorf("%d sockets opened for %d exchanges, %d of them answered: want one each", d, workers*each, workers*each*2/3)
	}
}

// An answer far larger than the query's EDNS size (43 KB here, against
// the 4096-byte buffer) is read whole by the socket's reader, so it is
// known to be too large: a truncated answer, retried over TCP, never an
// answer cut short and charged to the upstream as malformed (issue 16).
// Before the fix the exchange failed with ErrMalformed.
func TestUDPOversizedAnswerIsRetriedOverTCP(t *testing.T) {
	t.Parallel()
	eachUDPKind(t, testOversizedAnswer)
}

func testOversizedAnswer(t *testing.T, newUDP func(testing.TB, string) *UDP) {
	const records = 2700 // about 43 KB compressed
	huge := func(w *wiretest.Writer, q *dns.Msg) {
		r := new(dns.Msg).SetReply(q)
		for i := range records {
			r.Answer = append(r.Answer, wiretest.A(q.Question[0].Name, i))
		}
		r.Compress = true
		b, err := r.Pack()
		if err != nil {
			panic(err) // a fixed message: cannot fail
		}
		w.WriteRaw(b)
	}
	srv := wiretest.NewServer(t, wiretest.ByProto(huge, wiretest.Answer()))
	u := newUDP(t, srv.Addr)

	q := mustQuery(t, wiretest.Query("huge.example", dns.TypeA))
	q.Buf = make([]byte, 0, smallBufLen)
	a, err := u.Exchange(ctxWithin(t, answerTimeout), q, within(answerTimeout))
	if err != nil {
		t.Fatalf("exchange: %v, want the answer over TCP", err)
	}
	r, err := answerMsg(a, q.Msg.Id)
	if err != nil {
		t.Fatal(err)
	}
	if r.Truncated || len(r.Answer) != 1 {
		t.Errorf("answer TC=%v with %d records, want TCP's whole answer of 1", r.Truncated, len(r.Answer))
	}
	if udp, tcp := srv.UDPQueries(), srv.TCPQueries(); udp != 1 || tcp != 1 {
		t.Errorf("server saw %d UDP and %d TCP queries, want 1 and 1", udp, tcp)
	}
}
