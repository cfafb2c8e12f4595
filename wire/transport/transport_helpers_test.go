package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// Deadlines of the transport tests.
const (
	// answerTimeout bounds exchanges a test expects to succeed. It is never
	// reached when the code works, so it is generous: a loaded machine
	// running -race must not fail a correct exchange.
	answerTimeout = 5 * time.Second

	// expiryTimeout bounds exchanges a test expects to expire. Short, so
	// the suite stays fast; the test asserts the kind of error, not the
	// time taken.
	expiryTimeout = 50 * time.Millisecond
)

// ctxWithin returns a context expiring after d, cancelled at the test's end.
func ctxWithin(tb testing.TB, d time.Duration) context.Context {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}

// within returns the expiry d from now, for an exchange bounded by its
// expiry alone (under t.Context(), which has no deadline).
func within(d time.Duration) time.Time { return time.Now().Add(d) }

// newTestUDP returns a UDP transport to addr, closed at the test's end
// (before the fake server it talks to, which was started earlier).
func newTestUDP(tb testing.TB, addr string, opts ...Option) *UDP {
	tb.Helper()
	u := NewUDP(addr, opts...)
	tb.Cleanup(func() { _ = u.Close() })
	return u
}

// newTestTCP is newTestUDP for TCP.
func newTestTCP(tb testing.TB, addr string, opts ...Option) *TCP {
	tb.Helper()
	t := NewTCP(addr, opts...)
	tb.Cleanup(func() { _ = t.Close() })
	return t
}

// transportCase names a transport constructor, for tests that hold for UDP
// and TCP alike.
type transportCase struct {
	name string
	new  func(tb testing.TB, addr string) Transport
}

var bothTransports = []transportCase{
	{"udp", func(tb testing.TB, addr string) Transport { return newTestUDP(tb, addr) }},
	{"tcp", func(tb testing.TB, addr string) Transport { return newTestTCP(tb, addr) }},
}

// exchangeMsg exchanges m through x as a caller holding a message only
// does: packed by NewQuery (no answer buffer), under ctx, with ctx's
// deadline (if any) as the expiry. An answer as bytes is unpacked and
// given m's ID in place of the wire ID, so that the tests read a message
// with the query's ID whatever the transport answered with.
func exchangeMsg(ctx context.Context, x Exchanger, m *dns.Msg) (*dns.Msg, error) {
	q, err := NewQuery(m)
	if err != nil {
		return nil, err
	}
	expiry, _ := ctx.Deadline()
	a, err := x.Exchange(ctx, q, expiry)
	if err != nil {
		return nil, err
	}
	return answerMsg(a, m.Id)
}

// answerMsg is a's message: a.Msg, or a.Raw unpacked with id in place of
// the wire ID. It is an error unless exactly one of them is set.
func answerMsg(a Answer, id uint16) (*dns.Msg, error) {
	switch {
	case (a.Msg == nil) == (a.Raw == nil):
		return nil, fmt.Errorf("an answer with Msg set %v and %d raw bytes, want exactly one of them", a.Msg != nil, len(a.Raw))
	case a.Msg != nil:
		return a.Msg, nil
	}
	r := new(dns.Msg)
	if err := r.Unpack(a.Raw); err != nil {
		return nil, fmt.Errorf("the raw answer does not parse: %w", err)
	}
	r.Id = id
	return r, nil
}

// mustQuery is NewQuery(m), failing the test on error.
func mustQuery(tb testing.TB, m *dns.Msg) *Query {
	tb.Helper()
	q, err := NewQuery(m)
	if err != nil {
		tb.Fatal(err)
	}
	return q
}

// mustAnswer exchanges q through ex and fails the test unless an answer to
// q comes back with q's ID.
func mustAnswer(tb testing.TB, ex Exchanger, q *dns.Msg) *dns.Msg {
	tb.Helper()
	r, err := exchangeMsg(ctxWithin(tb, answerTimeout), ex, q)
	if err != nil {
		tb.Fatalf("Exchange(%s): %v", q.Question[0].Name, err)
	}
	checkAnswers(tb, r, q)
	return r
}

// checkAnswers fails the test unless r answers q: q's ID and question.
func checkAnswers(tb testing.TB, r, q *dns.Msg) {
	tb.Helper()
	if r.Id != q.Id {
		tb.Errorf("answer ID %d, want the query's %d", r.Id, q.Id)
	}
	if !sameQuestion(r.Question, q.Question) {
		tb.Errorf("answer question %s, want %s", questionString(r.Question), questionString(q.Question))
	}
}

// isExpiry reports whether err says the exchange's deadline passed: the
// context's error or the socket's timeout, both allowed by the contract.
func isExpiry(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || IsTimeout(err)
}

// query returns a query for name with EDNS, as the pool would forward it.
func query(name string) *dns.Msg {
	q := wiretest.Query(name, dns.TypeA)
	q.SetEdns0(1232, false)
	return q
}

// benchmarkReuse runs exchanges through a transport made by newT with its
// default socket reuse, then with none (WithMaxIdle(0)), side by side.
func benchmarkReuse(b *testing.B, newT func(tb testing.TB, addr string, opts ...Option) Exchanger) {
	srv := wiretest.NewServer(b, wiretest.Answer())
	for _, bc := range []struct {
		name string
		opts []Option
	}{{"reuse", nil}, {"fresh", []Option{WithMaxIdle(0)}}} {
		b.Run(bc.name, func(b *testing.B) {
			t := newT(b, srv.Addr, bc.opts...)
			q := query("bench.example")
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := exchangeMsg(ctx, t, q); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// cancelOneOfThree runs three exchanges on tr, which the server announces
// on received and holds until release closes, cancels the second while all
// three wait, and checks that it alone returns, promptly (at once, or at
// the next cancelPoll of a socket's reader), with context.Canceled, and
// that the other two are answered once released.
func cancelOneOfThree(t *testing.T, tr Exchanger, received <-chan string, release chan struct{}) {
	t.Helper()
	type result struct {
		name string
		err  error
	}
	results := make(chan result, 3)
	cancelCtx, cancel := context.WithCancel(ctxWithin(t, answerTimeout))
	for _, name := range []string{"kept1.example", "cancelled.example", "kept2.example"} {
		ctx := ctxWithin(t, answerTimeout)
		if name == "cancelled.example" {
			ctx = cancelCtx
		}
		go func() {
			_, err := exchangeMsg(ctx, tr, query(name))
			results <- result{name, err}
		}()
	}
	for range 3 {
		<-received
	}
	cancel()
	if r := <-results; r.name != "cancelled.example" || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("first to return: %s with %v, want cancelled.example with context.Canceled", r.name, r.err)
	}
	close(release)
	for range 2 {
		if r := <-results; r.err != nil {
			t.Errorf("%s: %v", r.name, r.err)
		}
	}
}

// checkAnswerLeavesQuery exchanges a query with ID 4321 through ex, whose
// fake answers with one A record: the answer must be that record (with the
// query's ID, mustAnswer checks) and the query as it was.
func checkAnswerLeavesQuery(t *testing.T, ex Exchanger) {
	t.Helper()
	q := query("example.com")
	q.Id = 4321
	before, err := q.Pack()
	if err != nil {
		t.Fatal(err)
	}
	r := mustAnswer(t, ex, q)
	if len(r.Answer) != 1 || r.Answer[0].Header().Rrtype != dns.TypeA {
		t.Errorf("answer %v, want one A record", r.Answer)
	}
	after, err := q.Pack()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Error("Exchange modified the query")
	}
}

// pack packs m or fails tb.
func pack(tb testing.TB, m *dns.Msg) []byte {
	tb.Helper()
	b, err := m.Pack()
	if err != nil {
		tb.Fatalf("packing: %v", err)
	}
	return b
}
