package forward

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/transport"
	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// Deadlines of these tests.
const (
	// answerTimeout bounds exchanges a test expects to succeed: never
	// reached when the code works, so generous for a loaded machine
	// running -race.
	answerTimeout = 5 * time.Second

	// expiryTimeout bounds exchanges a test expects to expire. Short, so
	// the suite stays fast; the tests assert the kind of error, not the
	// time taken.
	expiryTimeout = 50 * time.Millisecond
)

func newTestClient(tb testing.TB, resolver string, readTimeout time.Duration) *Client {
	tb.Helper()
	c := New(resolver, readTimeout)
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// query returns a query for name with EDNS, as the query path forwards it.
func query(name string) *dns.Msg {
	q := wiretest.Query(name, dns.TypeA)
	q.SetEdns0(1232, false)
	return q
}

func mustQuery(tb testing.TB, m *dns.Msg) *transport.Query {
	tb.Helper()
	q, err := transport.NewQuery(m)
	if err != nil {
		tb.Fatal(err)
	}
	return q
}

// exchangeMsg exchanges m through c with ctx's deadline (if any) as the
// expiry and returns the answer as a message with m's ID.
func exchangeMsg(ctx context.Context, c *Client, m *dns.Msg) (*dns.Msg, error) {
	q, err := transport.NewQuery(m)
	if err != nil {
		return nil, err
	}
	expiry, _ := ctx.Deadline()
	a, err := c.Exchange(ctx, q, expiry)
	if err != nil {
		return nil, err
	}
	if a.Msg != nil {
		return a.Msg, nil
	}
	r := new(dns.Msg)
	if err := r.Unpack(a.Raw); err != nil {
		return nil, fmt.Errorf("the raw answer does not parse: %w", err)
	}
	r.Id = m.Id
	return r, nil
}

// mustAnswer exchanges q through c and fails the test unless an answer to
// q comes back.
func mustAnswer(tb testing.TB, c *Client, q *dns.Msg) *dns.Msg {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), answerTimeout)
	defer cancel()
	r, err := exchangeMsg(ctx, c, q)
	if err != nil {
		tb.Fatalf("Exchange(%s): %v", q.Question[0].Name, err)
	}
	if r.Id != q.Id || len(r.Question) != 1 || r.Question[0] != q.Question[0] {
		tb.Errorf("answer %d %v, want the query's ID %d and question %v", r.Id, r.Question, q.Id, q.Question[0])
	}
	return r
}

func TestClientAnswersOverUDP(t *testing.T) {
	t.Parallel()
	srv := wiretest.NewServer(t, wiretest.Answer())
	c := newTestClient(t, srv.Addr, answerTimeout)

	mustAnswer(t, c, query("nas.lan"))
	if udp, tcp := srv.UDPQueries(), srv.TCPQueries(); udp != 1 || tcp != 0 {
		t.Errorf("resolver saw %d UDP and %d TCP queries, want 1 and 0", udp, tcp)
	}
}

func TestClientFallsBackToTCP(t *testing.T) {
	t.Parallel()
	srv := wiretest.NewServer(t, wiretest.Truncating(100))
	c := newTestClient(t, srv.Addr, answerTimeout)

	r := mustAnswer(t, c, query("big.lan"))
	if r.Truncated || len(r.Answer) != 100 {
		t.Errorf("answer TC=%v with %d records, want the whole 100", r.Truncated, len(r.Answer))
	}
}

// Over real sockets: a truncated UDP answer, then a stalled TCP exchange,
// end in a timeout of the resolver after TCP was reached. How long it took
// is asserted exactly, with fakes, by TestClientOneBudget here and, for
// the fallback's share of the one deadline, by wire/transport's
// TestFallbackOneBudget.
func TestClientTruncatedThenStalled(t *testing.T) {
	t.Parallel()
	tcpReached := make(chan string, 1)
	srv := wiretest.NewServer(t, wiretest.ByProto(
		wiretest.Truncating(1),
		wiretest.Notify(tcpReached, wiretest.Stall),
	))
	c := newTestClient(t, srv.Addr, expiryTimeout)

	_, err := exchangeMsg(context.Background(), c, query("slow.lan"))
	if !errors.Is(err, transport.ErrResolverTimeout) {
		t.Fatalf("Exchange = %v, want ErrResolverTimeout", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Exchange = %v: a resolver timeout must not read as a deadline of the caller's", err)
	}
	select {
	case <-tcpReached:
	case <-time.After(answerTimeout): // the server reads the query a moment after it was sent
		t.Error("the exchange never reached TCP")
	}
}

// The read timeout bounds UDP, fallback and TCP together (spec section 5):
// the client fixes one deadline at the start, and the exchange it runs (a
// truncated UDP answer arriving late, then a stalled TCP exchange) ends at
// it, never at a fresh read timeout; an earlier deadline of the caller's,
// or an earlier expiry, shortens that one deadline. A fake exchanger in a
// synctest bubble lets the test assert exact durations; that the UDP
// transport gives its TCP retry the same expiry is wire/transport's
// TestFallbackOneBudget.
func TestClientOneBudget(t *testing.T) {
	t.Parallel()
	const (
		readTimeout = 2 * time.Second
		udpDelay    = 1500 * time.Millisecond
	)
	cases := []struct {
		name         string
		callerBudget time.Duration // 0: no deadline of the caller's
		expiry       time.Duration // 0: no expiry
		want         time.Duration // when the exchange must end
	}{
		{"read timeout", 0, 0, readTimeout},
		{"caller's deadline first", 1800 * time.Millisecond, 0, 1800 * time.Millisecond},
		{"caller's deadline later", time.Hour, 0, readTimeout},
		{"expiry first", 0, 1700 * time.Millisecond, 1700 * time.Millisecond},
		{"expiry later", 0, time.Hour, readTimeout},
		{"expiry before the caller's deadline", 1800 * time.Millisecond, 1700 * time.Millisecond, 1700 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				// The UDP transport as the client sees it: a truncated
				// answer late, then TCP stalling to the one deadline.
				var tcpDeadline time.Time
				truncatedThenStalled := transport.MsgFunc(func(ctx context.Context, _ *dns.Msg) (*dns.Msg, error) {
					select {
					case <-time.After(udpDelay):
					case <-ctx.Done():
						return nil, ctx.Err()
					}
					tcpDeadline, _ = ctx.Deadline()
					<-ctx.Done()
					return nil, fmt.Errorf("reading from tcp://fake: %w", ctx.Err())
				})
				c := newClient("fake", readTimeout, truncatedThenStalled, nil)
				ctx := context.Background()
				if tc.callerBudget > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tc.callerBudget)
					defer cancel()
				}

				var expiry time.Time
				if tc.expiry > 0 {
					expiry = start.Add(tc.expiry)
				}

				_, err := c.Exchange(ctx, mustQuery(t, query("slow.lan")), expiry)
				if !errors.Is(err, transport.ErrResolverTimeout) || errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Exchange = %v, want ErrResolverTimeout only", err)
				}
				if d := time.Since(start); d != tc.want {
					t.Errorf("Exchange took %v, want %v", d, tc.want)
				}
				if want := start.Add(tc.want); !tcpDeadline.Equal(want) {
					t.Errorf("TCP ran to %v after the start, want %v", tcpDeadline.Sub(start), tc.want)
				}
			})
		})
	}
}

// A caller's deadline earlier than the read timeout still ends in a timeout
// of the resolver, never in a budget error.
func TestClientCallerDeadlineIsAResolverTimeout(t *testing.T) {
	t.Parallel()
	srv := wiretest.NewServer(t, wiretest.Stall)
	c := newTestClient(t, srv.Addr, answerTimeout)

	ctx, cancel := context.WithTimeout(context.Background(), expiryTimeout)
	defer cancel()
	_, err := c.Exchange(ctx, mustQuery(t, query("stall.lan")), time.Time{})
	if !errors.Is(err, transport.ErrResolverTimeout) {
		t.Fatalf("Exchange = %v, want ErrResolverTimeout", err)
	}
}

func TestClientStopsWhenCancelled(t *testing.T) {
	t.Parallel()
	received := make(chan string, 1)
	srv := wiretest.NewServer(t, wiretest.Notify(received, wiretest.Stall))
	c := newTestClient(t, srv.Addr, answerTimeout)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	done := make(chan error, 1)
	go func() {
		_, err := exchangeMsg(ctx, c, query("cancel.lan"))
		done <- err
	}()
	<-received
	cancel()
	err := <-done
	if !errors.Is(err, context.Canceled) || errors.Is(err, transport.ErrResolverTimeout) {
		t.Fatalf("Exchange = %v, want context.Canceled and no timeout", err)
	}
}

func TestClientReportsPeerFaults(t *testing.T) {
	t.Parallel()
	srv := wiretest.NewServer(t, wiretest.Rcode(dns.RcodeRefused))
	c := newTestClient(t, srv.Addr, answerTimeout)

	if _, err := exchangeMsg(context.Background(), c, query("refused.lan")); !errors.Is(err, transport.ErrRefused) {
		t.Fatalf("Exchange = %v, want ErrRefused", err)
	}
}
