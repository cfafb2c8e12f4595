package transport

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

func newTestForwarder(tb testing.TB, resolver string, readTimeout time.Duration) *Forwarder {
	tb.Helper()
	f := NewForwarder(resolver, readTimeout)
	tb.Cleanup(func() { _ = f.Close() })
	return f
}

func TestForwarderAnswersOverUDP(t *testing.T) {
	t.Parallel()
	srv := wiretest.NewServer(t, wiretest.Answer())
	f := newTestForwarder(t, srv.Addr, answerTimeout)

	mustAnswer(t, f, query("nas.lan"))
	if udp, tcp := srv.UDPQueries(), srv.TCPQueries(); udp != 1 || tcp != 0 {
		t.Errorf("resolver saw %d UDP and %d TCP queries, want 1 and 0", udp, tcp)
	}
}

func TestForwarderFallsBackToTCP(t *testing.T) {
	t.Parallel()
	srv := wiretest.NewServer(t, wiretest.Truncating(100))
	f := newTestForwarder(t, srv.Addr, answerTimeout)

	r := mustAnswer(t, f, query("big.lan"))
	if r.Truncated || len(r.Answer) != 100 {
		t.Errorf("answer TC=%v with %d records, want the whole 100", r.Truncated, len(r.Answer))
	}
}

// Over real sockets: a truncated UDP answer, then a stalled TCP exchange,
// end in a timeout of the resolver after TCP was reached. How long it took
// is asserted exactly, with fakes, by TestForwarderOneBudget.
func TestForwarderTruncatedThenStalled(t *testing.T) {
	t.Parallel()
	tcpReached := make(chan string, 1)
	srv := wiretest.NewServer(t, wiretest.ByProto(
		wiretest.Truncating(1),
		wiretest.Notify(tcpReached, wiretest.Stall),
	))
	f := newTestForwarder(t, srv.Addr, expiryTimeout)

	_, err := exchangeMsg(context.Background(), f, query("slow.lan"))
	if !errors.Is(err, ErrResolverTimeout) {
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
// a truncated UDP answer arriving late leaves TCP only the rest of the one
// deadline, never a fresh read timeout; an earlier deadline of the
// caller's, or an earlier expiry, shortens that one deadline. Fake
// exchangers in a synctest bubble let the test assert exact durations.
func TestForwarderOneBudget(t *testing.T) {
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
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				truncatedLate := MsgFunc(func(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
					select {
					case <-time.After(udpDelay):
						r := new(dns.Msg).SetReply(m)
						r.Truncated = true
						return r, nil
					case <-ctx.Done():
						return nil, ctx.Err()
					}
				})
				var tcpDeadline time.Time
				stalled := MsgFunc(func(ctx context.Context, _ *dns.Msg) (*dns.Msg, error) {
					tcpDeadline, _ = ctx.Deadline()
					<-ctx.Done()
					return nil, fmt.Errorf("reading from tcp://fake: %w", ctx.Err())
				})
				f := newForwarder("fake", readTimeout, truncatedLate, stalled, nil)
				ctx := context.Background()
				if c.callerBudget > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, c.callerBudget)
					defer cancel()
				}

				var expiry time.Time
				if c.expiry > 0 {
					expiry = start.Add(c.expiry)
				}

				_, err := f.Exchange(ctx, mustQuery(t, query("slow.lan")), expiry)
				if !errors.Is(err, ErrResolverTimeout) || errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Exchange = %v, want ErrResolverTimeout only", err)
				}
				if d := time.Since(start); d != c.want {
					t.Errorf("Exchange took %v, want %v", d, c.want)
				}
				if want := start.Add(c.want); !tcpDeadline.Equal(want) {
					t.Errorf("TCP ran to %v after the start, want %v", tcpDeadline.Sub(start), c.want)
				}
			})
		})
	}
}

// A caller's deadline earlier than the read timeout still ends in a timeout
// of the resolver, never in a budget error.
func TestForwarderCallerDeadlineIsAResolverTimeout(t *testing.T) {
	t.Parallel()
	srv := wiretest.NewServer(t, wiretest.Stall)
	f := newTestForwarder(t, srv.Addr, answerTimeout)

	_, err := f.Exchange(ctxWithin(t, expiryTimeout), mustQuery(t, query("stall.lan")), time.Time{})
	if !errors.Is(err, ErrResolverTimeout) {
		t.Fatalf("Exchange = %v, want ErrResolverTimeout", err)
	}
}

func TestForwarderStopsWhenCancelled(t *testing.T) {
	t.Parallel()
	received := make(chan string, 1)
	srv := wiretest.NewServer(t, wiretest.Notify(received, wiretest.Stall))
	f := newTestForwarder(t, srv.Addr, answerTimeout)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	done := make(chan error, 1)
	go func() {
		_, err := exchangeMsg(ctx, f, query("cancel.lan"))
		done <- err
	}()
	<-received
	cancel()
	err := <-done
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrResolverTimeout) {
		t.Fatalf("Exchange = %v, want context.Canceled and no timeout", err)
	}
}

func TestForwarderReportsPeerFaults(t *testing.T) {
	t.Parallel()
	srv := wiretest.NewServer(t, wiretest.Rcode(dns.RcodeRefused))
	f := newTestForwarder(t, srv.Addr, answerTimeout)

	if _, err := exchangeMsg(context.Background(), f, query("refused.lan")); !errors.Is(err, ErrRefused) {
		t.Fatalf("Exchange = %v, want ErrRefused", err)
	}
}
