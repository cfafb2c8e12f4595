package transport

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/miekg/dns"
)

// The TCP fallback runs in what is left of the one expiry: a truncated
// answer arriving late leaves TCP only the rest of it, never a fresh
// budget, and a deadline of the caller's that comes first ends both. The
// forward-zone client (query/forward) relies on it for its read timeout
// (spec section 5). Fake exchangers in a synctest bubble let the test
// assert exact durations.
func TestFallbackOneBudget(t *testing.T) {
	t.Parallel()
	const (
		expiryAfter = 2 * time.Second
		udpDelay    = 1500 * time.Millisecond
	)
	cases := []struct {
		name         string
		callerBudget time.Duration // 0: no deadline of the caller's
		want         time.Duration // when the exchange must end
	}{
		{"expiry", 0, expiryAfter},
		{"caller's deadline first", 1800 * time.Millisecond, 1800 * time.Millisecond},
		{"caller's deadline later", time.Hour, expiryAfter},
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
				ctx := context.Background()
				if c.callerBudget > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, c.callerBudget)
					defer cancel()
				}

				_, err := exchangeFallingBack(ctx, mustQuery(t, query("slow.lan")), start.Add(expiryAfter), truncatedLate, stalled)
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("exchange = %v, want the deadline's error", err)
				}
				if d := time.Since(start); d != c.want {
					t.Errorf("exchange took %v, want %v", d, c.want)
				}
				if want := start.Add(c.want); !tcpDeadline.Equal(want) {
					t.Errorf("TCP ran to %v after the start, want %v", tcpDeadline.Sub(start), c.want)
				}
			})
		})
	}
}
