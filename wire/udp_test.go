package wire

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

func TestUDPAnswerKeepsTheQueryID(t *testing.T) {
	t.Parallel()
	srv := wiretest.NewServer(t, wiretest.Answer())
	u := newTestUDP(t, srv.Addr)
	checkAnswerLeavesQuery(t, u)
	if got := srv.UDPQueries(); got != 1 {
		t.Errorf("server saw %d UDP queries, want 1", got)
	}
	if got := srv.TCPQueries(); got != 0 {
		t.Errorf("server saw %d TCP queries, want 0", got)
	}
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
	u := newTestUDP(t, wiretest.Refusing(t))

	_, err := exchangeMsg(ctxWithin(t, answerTimeout), u, query("example.com"))
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Exchange to a closed port: %v, want ECONNREFUSED", err)
	}
}

func TestUDPReusesCleanSockets(t *testing.T) {
	t.Parallel()
	srv := wiretest.NewServer(t, wiretest.Answer())
	u := newTestUDP(t, srv.Addr)

	for i := range 50 {
		mustAnswer(t, u, query(fmt.Sprintf("q%d.example", i)))
	}
	if got := u.dials.Load(); got != 1 {
		t.Errorf("50 sequential exchanges opened %d sockets, want 1", got)
	}
	if got := srv.UDPQueries(); got != 50 {
		t.Errorf("server saw %d queries, want 50", got)
	}
}

// An answer that comes after its exchange expired is recognised as late
// and dropped: it cannot pass for the next exchange's answer, and the
// socket that carried both stays in service.
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
	if got := u.dials.Load(); got != 1 {
		t.Errorf("opened %d sockets, want 1: a late answer is no reason to leave one", got)
	}
}

// After udpSocketIDs exchanges a socket is retired for one on a new port,
// and closed.
func TestUDPRotatesSockets(t *testing.T) {
	t.Parallel()
	srv := wiretest.NewServer(t, wiretest.Answer())
	u := newTestUDP(t, srv.Addr)

	for i := range udpSocketIDs + 1 {
		mustAnswer(t, u, query(fmt.Sprintf("q%d.example", i)))
	}
	if got := u.dials.Load(); got != 2 {
		t.Errorf("%d exchanges opened %d sockets, want 2", udpSocketIDs+1, got)
	}
	u.mu.Lock()
	open := len(u.socks)
	u.mu.Unlock()
	if open != 1 {
		t.Errorf("%d sockets open, want 1: the retired one closes with its last exchange", open)
	}
}

// On a shared socket an answer with an ID no exchange waits for is
// evidence against nobody: it is dropped, the exchange waiting expires
// (which the pool records against the upstream), and the socket stays.
func TestUDPUnknownIDIsDropped(t *testing.T) {
	t.Parallel()
	srv := wiretest.NewServer(t, wiretest.WrongID)
	u := newTestUDP(t, srv.Addr)

	_, err := exchangeMsg(ctxWithin(t, expiryTimeout), u, query("lie.example"))
	if !isExpiry(err) {
		t.Fatalf("exchange with an upstream answering wrong IDs: %v, want an expiry", err)
	}
	_, _ = exchangeMsg(ctxWithin(t, expiryTimeout), u, query("lie2.example"))
	if got := u.dials.Load(); got != 1 {
		t.Errorf("opened %d sockets, want 1: a stray datagram is no reason to leave one", got)
	}
}

// An upstream that answers twice leaves a duplicate in the reused socket;
// the next exchange skips it as the previous exchange's, not as a mismatch.
func TestUDPSkipsDuplicateOfPreviousAnswer(t *testing.T) {
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
	<-sentTwice // the duplicate now waits in the socket's receive queue
	mustAnswer(t, u, query("next.example"))
	if got := u.dials.Load(); got != 1 {
		t.Errorf("opened %d sockets, want 1", got)
	}
}

func TestUDPConcurrentExchangesGetTheirOwnAnswers(t *testing.T) {
	t.Parallel()
	const n = 200
	srv := wiretest.NewServer(t, wiretest.Answer())
	u := newTestUDP(t, srv.Addr)

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
	if got := u.dials.Load(); got != 1 {
		t.Errorf("%d concurrent exchanges opened %d sockets, want 1 shared", n, got)
	}
}

func TestUDPCloseStopsItsSockets(t *testing.T) {
	t.Parallel()
	srv := wiretest.NewServer(t, wiretest.Answer())
	u := NewUDP(srv.Addr)

	mustAnswer(t, u, query("a.example"))
	if err := u.Close(); err != nil {
		t.Fatal(err)
	}
	u.mu.Lock()
	open := len(u.socks)
	u.mu.Unlock()
	if open != 0 {
		t.Errorf("%d sockets open after Close, want 0", open)
	}
	// The reader is gone (goleak checks at the end); later exchanges fail.
	if _, err := exchangeMsg(ctxWithin(t, answerTimeout), u, query("b.example")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("exchange after Close: %v, want net.ErrClosed", err)
	}
}

// A Close while an exchange waits fails it at once.
func TestUDPCloseFailsWaitingExchanges(t *testing.T) {
	t.Parallel()
	received := make(chan string, 1)
	srv := wiretest.NewServer(t, wiretest.Notify(received, wiretest.Stall))
	u := NewUDP(srv.Addr)
	go func() {
		<-received
		_ = u.Close()
	}()
	_, err := exchangeMsg(ctxWithin(t, time.Hour), u, query("stall.example"))
	if !errors.Is(err, net.ErrClosed) {
		t.Errorf("exchange when Close came: %v, want net.ErrClosed", err)
	}
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

// Many exchanges at once on sockets that rotate every few exchanges, with
// answers that come at once, late (after their exchange expired) and
// twice: every exchange gets its own answer or its own expiry, never
// another's, and when they are over one socket at most is left open.
func TestUDPSharedSocketsUnderLoad(t *testing.T) {
	t.Parallel()
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
	u := newTestUDP(t, srv.Addr)
	u.socketIDs = 7 // rotate often

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
	u.mu.Lock()
	open := len(u.socks)
	u.mu.Unlock()
	if open > 1 {
		t.Errorf("%d sockets open after every exchange ended, want at most 1", open)
	}
	if d := u.dials.Load(); d < workers*each/7 {
		t.Errorf("%d sockets opened for %d exchanges at 7 each, want at least %d", d, workers*each, workers*each/7)
	}
}

// An answer far larger than the query's EDNS size (43 KB here, against
// the 4096-byte buffer) is read whole by the socket's reader, so it is
// known to be too large: a truncated answer, retried over TCP, never an
// answer cut short and charged to the upstream as malformed (issue 16).
// Before the fix the exchange failed with ErrMalformed.
func TestUDPOversizedAnswerIsRetriedOverTCP(t *testing.T) {
	t.Parallel()
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
	u := newTestUDP(t, srv.Addr)

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
