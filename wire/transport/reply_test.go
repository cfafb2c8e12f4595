package transport

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/dnsmsg"
	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// Faults of the peer map to the sentinels on every transport, but for a
// wrong ID over UDP: on the socket all exchanges share, a datagram with an
// ID nobody waits for is dropped (see UDP), so that exchange expires.
func TestTransportsReportPeerFaults(t *testing.T) {
	t.Parallel()
	echoQuery := func(w *wiretest.Writer, q *dns.Msg) { w.WriteMsg(q) } // QR clear
	faults := []struct {
		name    string
		handler wiretest.Handler
		want    error
	}{
		{"wrong ID", wiretest.WrongID, ErrIDMismatch},
		{"wrong question", wiretest.WrongQuestion, ErrQuestionMismatch},
		{"garbage", wiretest.Garbage, ErrMalformed},
		{"query echoed", echoQuery, ErrMalformed},
		{"refused", wiretest.Rcode(dns.RcodeRefused), ErrRefused},
	}
	for _, tr := range bothTransports {
		for _, f := range faults {
			t.Run(tr.name+"/"+f.name, func(t *testing.T) {
				t.Parallel()
				srv := wiretest.NewServer(t, f.handler)
				ex := tr.new(t, srv.Addr)

				if tr.name == "udp" && f.want == ErrIDMismatch {
					_, err := exchangeMsg(ctxWithin(t, expiryTimeout), ex, query("fault.example"))
					if !isExpiry(err) {
						t.Fatalf("Exchange: %v; want an expiry", err)
					}
					return
				}
				r, err := exchangeMsg(ctxWithin(t, answerTimeout), ex, query("fault.example"))
				if !errors.Is(err, f.want) {
					t.Fatalf("Exchange = %v, %v; want %v", r, err, f.want)
				}
				if !strings.Contains(err.Error(), tr.name+"://"+srv.Addr) {
					t.Errorf("error %q does not name the upstream", err)
				}
			})
		}
	}
}

// Well-formed answers pass as they are, SERVFAIL included; names compare
// case-insensitively (some servers randomise the case of the question).
func TestTransportsPassWellFormedAnswers(t *testing.T) {
	t.Parallel()
	upperCased := func(w *wiretest.Writer, q *dns.Msg) {
		r := new(dns.Msg).SetReply(q)
		r.Question[0].Name = strings.ToUpper(r.Question[0].Name)
		w.WriteMsg(r)
	}
	answers := []struct {
		name    string
		handler wiretest.Handler
		rcode   int
	}{
		{"servfail", wiretest.Rcode(dns.RcodeServerFailure), dns.RcodeServerFailure},
		{"nxdomain", wiretest.Rcode(dns.RcodeNameError), dns.RcodeNameError},
		{"question upper-cased", upperCased, dns.RcodeSuccess},
	}
	for _, tr := range bothTransports {
		for _, a := range answers {
			t.Run(tr.name+"/"+a.name, func(t *testing.T) {
				t.Parallel()
				srv := wiretest.NewServer(t, a.handler)
				r := mustAnswer(t, tr.new(t, srv.Addr), query("Mixed.Example"))
				if r.Rcode != a.rcode {
					t.Errorf("rcode %s, want %s", dns.RcodeToString[r.Rcode], dns.RcodeToString[a.rcode])
				}
			})
		}
	}
}

// A stalled upstream costs the exchange's deadline and no more: the
// exchange ends with a deadline error, after the deadline, whether the
// deadline is the expiry the exchange was given or the context's.
func TestTransportsHonourTheDeadline(t *testing.T) {
	t.Parallel()
	for _, tr := range bothTransports {
		for _, by := range []string{"expiry", "context"} {
			t.Run(tr.name+"/"+by, func(t *testing.T) {
				t.Parallel()
				srv := wiretest.NewServer(t, wiretest.Stall)
				ex := tr.new(t, srv.Addr)
				ctx, deadline := t.Context(), time.Now().Add(expiryTimeout)
				expiry := deadline
				if by == "context" {
					ctx = ctxWithin(t, expiryTimeout)
					deadline, _ = ctx.Deadline()
					expiry = time.Time{}
				}

				_, err := ex.Exchange(ctx, mustQuery(t, query("stall.example")), expiry)
				if !isExpiry(err) {
					t.Fatalf("Exchange = %v, want a deadline error", err)
				}
				if errors.Is(err, context.Canceled) {
					t.Errorf("Exchange = %v, an expiry reported as a cancellation", err)
				}
				if time.Now().Before(deadline) {
					t.Error("Exchange gave up before its deadline")
				}
			})
		}
	}
}

// Cancelling the context ends a stalled exchange promptly (over UDP at
// the next cancelPoll of the socket's reader) with context.Canceled: well
// before its distant deadline, which is why the error cannot be a
// deadline's.
func TestTransportsStopWhenCancelled(t *testing.T) {
	t.Parallel()
	for _, tr := range bothTransports {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			received := make(chan string, 1)
			srv := wiretest.NewServer(t, wiretest.Notify(received, wiretest.Stall))
			ex := tr.new(t, srv.Addr)
			ctx, cancel := context.WithTimeout(context.Background(), answerTimeout)
			defer cancel()

			done := make(chan error, 1)
			go func() {
				_, err := exchangeMsg(ctx, ex, query("cancel.example"))
				done <- err
			}()
			<-received
			cancel()
			err := <-done
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Exchange = %v, want context.Canceled", err)
			}
			if isExpiry(err) {
				t.Errorf("Exchange = %v, a cancellation reported as an expiry", err)
			}
		})
	}
}

// A context already done sends nothing.
func TestTransportsRefuseDoneContexts(t *testing.T) {
	t.Parallel()
	for _, tr := range bothTransports {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			srv := wiretest.NewServer(t, wiretest.Answer())
			ex := tr.new(t, srv.Addr)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()

			if _, err := exchangeMsg(ctx, ex, query("done.example")); !errors.Is(err, context.Canceled) {
				t.Fatalf("Exchange = %v, want context.Canceled", err)
			}
			if n := srv.UDPQueries() + srv.TCPQueries(); n != 0 {
				t.Errorf("server saw %d queries, want 0", n)
			}
		})
	}
}

// A query that cannot be packed is our fault: ErrPack from NewQuery; and a
// Query whose packed bytes cannot be a message gets ErrPack from every
// transport, nothing sent.
func TestTransportsReportPackFailures(t *testing.T) {
	t.Parallel()
	m := wiretest.Query("pack.example", dns.TypeA)
	m.Rcode = 0x100 // an extended rcode without an OPT record to carry it
	if q, err := NewQuery(m); !errors.Is(err, ErrPack) {
		t.Fatalf("NewQuery = %v, %v; want ErrPack", q, err)
	}
	for _, tr := range bothTransports {
		invalid := [][]byte{nil, make([]byte, dnsmsg.HeaderLen-1)}
		if tr.name == "tcp" {
			// More than a TCP frame's two-byte length can announce.
			invalid = append(invalid, make([]byte, maxMsgLen+1))
		}
		for _, packed := range invalid {
			t.Run(fmt.Sprintf("%s/%d bytes", tr.name, len(packed)), func(t *testing.T) {
				t.Parallel()
				srv := wiretest.NewServer(t, wiretest.Answer())
				ex := tr.new(t, srv.Addr)
				q := &Query{Msg: query("pack.example"), Packed: packed}

				if _, err := ex.Exchange(ctxWithin(t, answerTimeout), q, time.Time{}); !errors.Is(err, ErrPack) {
					t.Fatalf("Exchange = %v, want ErrPack", err)
				}
				if n := srv.UDPQueries() + srv.TCPQueries(); n != 0 {
					t.Errorf("server saw %d queries, want 0", n)
				}
			})
		}
	}
}
