package querylog

import (
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/internal/dnstext"
	"github.com/nxdnsd/nxdnsd/query"
)

// tsLayout is RFC 3339 in UTC with exactly six fractional digits: sortable
// as text, and precise enough to order the queries of one busy second.
const tsLayout = "2006-01-02T15:04:05.000000Z07:00"

// Encoder writes query.Entry values as the JSON lines of spec section 6.
// It appends to a caller's buffer and uses no reflection: with a buffer
// that has room, encoding allocates nothing (an attempt's error text is
// the exception: it is built by the error itself).
//
// The zero Encoder writes lines without attempt trails.
type Encoder struct {
	// Attempts adds "queued_ms" and the "attempts" trail to pool lines
	// (query_log.attempts).
	Attempts bool
}

// Append appends e's line, newline included, to b and returns the result.
//
// Fields, in order: ts, client, client_name (only when the client has a
// name: its DoH path's, or the one client names give it), proto, qname,
// qtype, qclass (only when the class is not IN), rcode, source, list (only
// on blocked lines: the list that blocked the query, "rule" for the custom
// rules), rebind (only true, when rebinding protection stripped the
// answer), upstream, duration_ms; then, for pool lines when e.Attempts is on,
// queued_ms and attempts. A field with nothing to say is null: source for
// a query refused before resolution (FORMERR, NOTIMP, BADVERS), qname and
// qtype for a query without a readable question, upstream when no upstream
// was attributed. upstream is e.Upstream untouched: the pool's attribution,
// or a forward zone's resolver.
func (enc *Encoder) Append(b []byte, e *query.Entry) []byte {
	b = append(b, `{"ts":"`...)
	b = appendTimestamp(b, e.Time)
	b = append(b, `","client":`...)
	if e.Client.IsValid() {
		b = append(b, '"')
		b = e.Client.AppendTo(b)
		b = append(b, '"')
	} else {
		b = append(b, "null"...)
	}
	if e.ClientName != "" {
		b = append(b, `,"client_name":`...)
		b = appendString(b, e.ClientName)
	}
	b = append(b, `,"proto":`...)
	b = appendString(b, e.Proto)
	b = append(b, `,"qname":`...)
	if e.QName == "" && e.QType == 0 {
		b = append(b, `null,"qtype":null`...)
	} else {
		b = appendString(b, e.QName)
		b = append(b, `,"qtype":`...)
		b = appendString(b, dnstext.Type(e.QType))
		if e.QClass != dns.ClassINET && e.QClass != 0 {
			b = append(b, `,"qclass":`...)
			b = appendString(b, dnstext.Class(e.QClass))
		}
	}
	b = append(b, `,"rcode":`...)
	b = appendString(b, dnstext.Rcode(e.Rcode))
	b = append(b, `,"source":`...)
	b = appendOptional(b, e.Source)
	if e.Source == query.SourceBlocked {
		b = append(b, `,"list":`...)
		b = appendOptional(b, e.List)
	}
	if e.Rebind {
		b = append(b, `,"rebind":true`...)
	}
	b = append(b, `,"upstream":`...)
	b = appendOptional(b, e.Upstream)
	b = append(b, `,"duration_ms":`...)
	b = appendMillis(b, e.Duration)
	if enc.Attempts && e.Source == query.SourcePool {
		b = append(b, `,"queued_ms":`...)
		b = appendMillis(b, e.Queued)
		b = append(b, `,"attempts":[`...)
		for i := range e.Attempts {
			if i > 0 {
				b = append(b, ',')
			}
			b = enc.appendAttempt(b, &e.Attempts[i])
		}
		b = append(b, ']')
	}
	return append(b, "}\n"...)
}

// appendAttempt writes one trail entry. The transport's error is added for
// the outcomes it explains (a peer fault, a local error); for the others
// it is only the attempt's deadline or cancellation, which the outcome
// already says.
func (enc *Encoder) appendAttempt(b []byte, a *actors.Attempt) []byte {
	b = append(b, `{"upstream":`...)
	b = appendOptional(b, a.Upstream)
	b = append(b, `,"outcome":"`...)
	b = append(b, a.Outcome.String()...)
	b = append(b, `","ms":`...)
	b = appendMillis(b, a.Duration)
	if a.Err != nil && (a.Outcome == actors.OutcomePeerFault || a.Outcome == actors.OutcomeLocalError) {
		b = append(b, `,"error":`...)
		b = appendString(b, a.Err.Error())
	}
	return append(b, '}')
}

// appendTimestamp writes t in UTC as tsLayout does, digit by digit: the
// layout-driven time.AppendFormat was the largest cost of a line.
func appendTimestamp(b []byte, t time.Time) []byte {
	t = t.UTC()
	y, mo, d := t.Date()
	if y < 0 || y > 9999 {
		return t.AppendFormat(b, tsLayout)
	}
	h, mi, s := t.Clock()
	b = appendDigits(b, y, 4)
	b = append(b, '-')
	b = appendDigits(b, int(mo), 2)
	b = append(b, '-')
	b = appendDigits(b, d, 2)
	b = append(b, 'T')
	b = appendDigits(b, h, 2)
	b = append(b, ':')
	b = appendDigits(b, mi, 2)
	b = append(b, ':')
	b = appendDigits(b, s, 2)
	b = append(b, '.')
	b = appendDigits(b, t.Nanosecond()/1000, 6)
	return append(b, 'Z')
}

// appendDigits writes v, which is not negative, as exactly n decimal
// digits, zero-padded.
func appendDigits(b []byte, v, n int) []byte {
	for i := n - 1; i >= 0; i-- {
		b = append(b, 0)
	}
	for i := len(b) - 1; i >= len(b)-n; i-- {
		b[i] = byte('0' + v%10)
		v /= 10
	}
	return b
}

// appendMillis writes d in milliseconds, rounded to the microsecond, in
// the shortest form that reads back exactly ("12.4", "2500.2", "0").
func appendMillis(b []byte, d time.Duration) []byte {
	ms := float64(d.Round(time.Microsecond)) / float64(time.Millisecond)
	if math.IsNaN(ms) || math.IsInf(ms, 0) {
		ms = 0
	}
	return strconv.AppendFloat(b, ms, 'f', -1, 64)
}

// appendOptional writes s as a JSON string, or null when it is empty.
func appendOptional(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return appendString(b, s)
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string. Names come off the wire, so
// nothing is assumed: quotes, backslashes and control characters are
// escaped, and bytes that are not UTF-8 become U+FFFD, as encoding/json
// does, so every line stays valid JSON.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
