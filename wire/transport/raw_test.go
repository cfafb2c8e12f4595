package transport

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// wireQuery packs q into a Query with an answer buffer of bufLen bytes,
// as the query path hands one to the transports.
func wireQuery(tb testing.TB, q *dns.Msg, bufLen int) *Query {
	tb.Helper()
	wq := mustQuery(tb, q)
	wq.Buf = make([]byte, 0, bufLen)
	return wq
}

// doneCounter is a context that counts the calls to Done, so a test can
// prove that a transport left it alone: it neither watched it nor derived
// a context with a deadline from it (context.WithDeadline asks its parent
// for Done), so no timer was armed for the exchange.
type doneCounter struct {
	context.Context
	doneCalls atomic.Int32
}

func (c *doneCounter) Done() <-chan struct{} {
	c.doneCalls.Add(1)
	return c.Context.Done()
}

// rawTransports are the transports with a byte path, each made against a
// fake running h.
var rawTransports = []struct {
	name string
	new  func(tb testing.TB, h wiretest.Handler) Exchanger
}{
	{"udp", func(tb testing.TB, h wiretest.Handler) Exchanger {
		return newTestUDP(tb, wiretest.NewServer(tb, h).Addr)
	}},
	{"tls", func(tb testing.TB, h wiretest.Handler) Exchanger {
		_, tr := newDoT(tb, h)
		return tr
	}},
}

// An answer the layout vouches for comes back as the bytes read, in the
// query's buffer; an exchange on a socket or connection that is up, bounded
// by its expiry, leaves the context's Done alone.
func TestExchangeHandsOverTheBytes(t *testing.T) {
	t.Parallel()
	for _, tr := range rawTransports {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			x := tr.new(t, wiretest.Answer())
			mustAnswer(t, x, query("warm.example")) // dialling asks for Done; reusing does not
			q := query("Example.COM")
			wq := wireQuery(t, q, 4096)

			ctx := &doneCounter{Context: t.Context()}
			a, err := x.Exchange(ctx, wq, within(answerTimeout))
			if err != nil {
				t.Fatal(err)
			}
			if a.Msg != nil || a.Raw == nil {
				t.Fatalf("answer Msg=%v Raw=%d bytes, want the bytes", a.Msg, len(a.Raw))
			}
			if &a.Raw[0] != &wq.Buf[:1][0] {
				t.Errorf("the answer is not in the query's buffer")
			}
			r := new(dns.Msg)
			if err := r.Unpack(a.Raw); err != nil {
				t.Fatalf("the bytes do not parse: %v", err)
			}
			if len(r.Question) != 1 || r.Question[0].Name != "Example.COM." || len(r.Answer) != 1 ||
				(a.Layout.OPT >= 0) != (r.IsEdns0() != nil) {
				t.Errorf("answer %v with OPT at %d, want one A record for Example.COM. and the OPT located if any", r, a.Layout.OPT)
			}
			if ctx.doneCalls.Load() != 0 {
				t.Errorf("the exchange called Done %d times, want 0", ctx.doneCalls.Load())
			}
		})
	}
}

func TestExchangeParsesWhatItCannotVouchFor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		handler wiretest.Handler
		bufLen  int
		check   func(*dns.Msg) bool
		udpOnly bool // over TLS (a stream, no UDP size) the bytes go as they are
	}{
		{"truncated: retried over TCP", wiretest.Truncating(100), 4096,
			func(r *dns.Msg) bool { return !r.Truncated && len(r.Answer) == 100 }, true},
		{"a record type the layout does not know", wiretest.Answer(&dns.CAA{
			Hdr: dns.RR_Header{Name: "example.com.", Rrtype: dns.TypeCAA, Class: dns.ClassINET, Ttl: 60},
			Tag: "issue", Value: "ca.example",
		}), 4096, func(r *dns.Msg) bool { return len(r.Answer) == 1 && r.Answer[0].Header().Rrtype == dns.TypeCAA }, false},
		{"a buffer smaller than the query's UDP size", wiretest.Answer(), 100,
			func(r *dns.Msg) bool { return len(r.Answer) == 1 }, true},
		{"an answer larger than the buffer", wiretest.Answer(wiretest.A("example.com.", 0), wiretest.A("example.com.", 1)), 0,
			func(r *dns.Msg) bool { return len(r.Answer) == 2 }, false},
	}
	for _, tr := range rawTransports {
		for _, tt := range tests {
			if tt.udpOnly && tr.name != "udp" {
				continue
			}
			t.Run(tr.name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				x := tr.new(t, tt.handler)
				q := query("example.com")
				a, err := x.Exchange(t.Context(), wireQuery(t, q, tt.bufLen), within(answerTimeout))
				if err != nil {
					t.Fatal(err)
				}
				if a.Raw != nil || a.Msg == nil || !tt.check(a.Msg) || a.Msg.Id != q.Id {
					t.Errorf("answer Raw=%d bytes Msg=%v, want the parsed message with the query's ID", len(a.Raw), a.Msg)
				}
			})
		}
	}
}

// The byte path fails as the message path does.
func TestExchangeBufferedErrors(t *testing.T) {
	t.Parallel()
	for _, tr := range rawTransports {
		for name, h := range map[string]wiretest.Handler{
			"wrong ID":       wiretest.WrongID,
			"wrong question": wiretest.WrongQuestion,
			"garbage":        wiretest.Garbage,
			"refused":        wiretest.Rcode(dns.RcodeRefused),
		} {
			t.Run(tr.name+"/"+name, func(t *testing.T) {
				t.Parallel()
				x := tr.new(t, h)
				q := query("example.com")
				// Over UDP a datagram with an ID nobody waits for is
				// dropped and the exchange expires; a stream fails at once,
				// but its TLS handshake needs time on a loaded machine.
				timeout := answerTimeout
				if tr.name == "udp" {
					timeout = expiryTimeout
				}
				_, errRaw := x.Exchange(t.Context(), wireQuery(t, q, 4096), within(timeout))
				_, errMsg := exchangeMsg(ctxWithin(t, timeout), x, q)
				if errRaw == nil || errMsg == nil || !sameSentinel(errRaw, errMsg) {
					t.Errorf("with a buffer: %v; without: %v; want the same failure", errRaw, errMsg)
				}
			})
		}
	}
}

// sameSentinel reports whether a and b match the same sentinel of this
// package, or are both expiries.
func sameSentinel(a, b error) bool {
	for _, s := range sentinelsByName {
		if errors.Is(a, s) != errors.Is(b, s) {
			return false
		}
	}
	return isExpiry(a) == isExpiry(b)
}

// An exchange is bounded by its expiry through the socket's reader, polls
// included, and notices cancellation by polling the context's Err. (Each
// exchange here dials, and dialling asks for Done: that is the dialler's,
// not a watch.)
func TestUDPExpiryAndCancelThroughTheReader(t *testing.T) {
	t.Parallel()
	srv := wiretest.NewServer(t, wiretest.Stall)
	u := newTestUDP(t, srv.Addr)

	// Longer than two polls: the exchange re-arms and still expires.
	_, err := u.Exchange(t.Context(), wireQuery(t, query("stall.example"), 4096), within(2*cancelPoll+cancelPoll/2))
	if !errors.Is(err, context.DeadlineExceeded) {
		// A bare socket timeout here would be a poll taken for the end.
		t.Errorf("stalled exchange: %v, want context.DeadlineExceeded", err)
	}

	cancelled, cancel := context.WithCancel(context.Background())
	defer cancel()
	received := make(chan string, 1)
	srv2 := wiretest.NewServer(t, wiretest.Notify(received, wiretest.Stall))
	u2 := newTestUDP(t, srv2.Addr)
	go func() {
		<-received
		cancel()
	}()
	_, err = u2.Exchange(cancelled, wireQuery(t, query("cancel.example"), 4096), within(time.Hour))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled exchange: %v, want context.Canceled", err)
	}
}

// Waits on one poller end each at its own deadline, whichever registered
// first: its goroutine is re-armed for an earlier deadline than it sleeps
// to, and a later one is kept for after its next poll.
func TestUDPWaitsShareTheReader(t *testing.T) {
	t.Parallel()
	received := make(chan string, 3)
	srv := wiretest.NewServer(t, wiretest.Notify(received, wiretest.Stall))
	u := newTestUDP(t, srv.Addr)

	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	long := make(chan error, 1)
	go func() {
		// No deadline at all: the reader sleeps to its first poll.
		_, err := u.Exchange(parent, wireQuery(t, query("long.example"), 4096), time.Time{})
		long <- err
	}()
	<-received // the long wait is registered and the reader sleeps to its poll

	// Earlier than the poll the reader sleeps to: it must be woken sooner.
	_, err := u.Exchange(t.Context(), wireQuery(t, query("short.example"), 4096), within(cancelPoll/4))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("short wait: %v, want context.DeadlineExceeded", err)
	}
	// Later than the next poll: kept past it, then ended.
	_, err = u.Exchange(t.Context(), wireQuery(t, query("later.example"), 4096), within(cancelPoll+cancelPoll/2))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("later wait: %v, want context.DeadlineExceeded", err)
	}
	select {
	case err := <-long:
		t.Fatalf("the long wait ended with the others: %v", err)
	default:
	}
	cancel()
	if err := <-long; !errors.Is(err, context.Canceled) {
		t.Errorf("long wait: %v, want context.Canceled", err)
	}
	if got := u.dials.Load(); got != 3 {
		t.Errorf("%d sockets for three exchanges, want one each", got)
	}
}
