package actors

import (
	"time"

	"github.com/nxdnsd/nxdnsd/wire/transport"
)

// Outcome is how one attempt ended, named as in the
// nxdns_upstream_attempts_total metric and the query log's attempt trail.
type Outcome uint8

const (
	OutcomeAnswer     Outcome = iota // the upstream answered; health records a success
	OutcomeExpired                   // the full attempt budget passed; health records a failure
	OutcomeCensored                  // a truncated attempt expired (or the transport reported the budget gone); nothing recorded
	OutcomePeerFault                 // the exchange completed with the upstream's fault; health records a failure
	OutcomeLocalError                // a local resource ran out; nothing recorded
	OutcomeCanceled                  // the client's query was cancelled; nothing recorded
	numOutcomes
)

// Outcomes lists every outcome, in metric order.
var Outcomes = [...]Outcome{OutcomeAnswer, OutcomeExpired, OutcomeCensored, OutcomePeerFault, OutcomeLocalError, OutcomeCanceled}

var outcomeNames = [numOutcomes]string{"answer", "expired", "censored", "peer_fault", "local_error", "canceled"}

// String returns the outcome's name in metrics and logs.
func (o Outcome) String() string {
	if o < numOutcomes {
		return outcomeNames[o]
	}
	return "unknown"
}

// Recorded reports whether this outcome enters the upstream's health.
func (o Outcome) Recorded() bool {
	return o == OutcomeAnswer || o == OutcomeExpired || o == OutcomePeerFault
}

// Attempt is one exchange with one upstream, as the query log's trail shows it.
type Attempt struct {
	Upstream string // the upstream's name
	Outcome  Outcome
	Duration time.Duration
	Err      error // the transport's error, nil for an answer
}

// Result is what Pool.Exchange found out about one query.
type Result struct {
	// Answer is the upstream's answer, set (Msg or Raw) when Err is nil. A
	// Raw answer lies in the query's Buf, with the wire ID still in place.
	transport.Answer

	// Err is nil with an answer, else one of ErrBudgetExhausted (the query's
	// deadline passed), ErrAllFailed (every upstream tried failed before the
	// deadline), the query's context's error (context.Canceled, or
	// context.DeadlineExceeded for a deadline of the caller's own), a
	// local resource error — every one of them answers SERVFAIL — or
	// ErrShareRefused (the client's share of the slots was taken), which
	// the query path answers REFUSED.
	Err error

	// Upstream is the name of the last upstream whose outcome was recorded
	// in its health (the attribution), or "" when none was.
	Upstream string

	// Queued is the time spent in blocking slot waits.
	Queued time.Duration

	// Attempts is the trail, appended to the slice the caller passed in.
	Attempts []Attempt
}
