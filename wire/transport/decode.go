package transport

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/dnsmsg"
)

// decodeReply parses raw, the answer to q sent with wire ID id, and
// validates it: the ID must be id (ErrIDMismatch), the bytes must parse as a
// response (ErrMalformed), the rcode must not be REFUSED (ErrRefused) and
// the question must be q's (ErrQuestionMismatch). The answer is returned
// with q's ID restored. The order matters: a header-only REFUSED (9.9.9.9
// sends those) is a refusal, not a question mismatch.
func decodeReply(q *dns.Msg, id uint16, raw []byte) (*dns.Msg, error) {
	if len(raw) < dnsmsg.HeaderLen {
		return nil, fmt.Errorf("%w: %d bytes is shorter than a header", ErrMalformed, len(raw))
	}
	if got := binary.BigEndian.Uint16(raw); got != id {
		return nil, fmt.Errorf("%w: sent %d, got %d", ErrIDMismatch, id, got)
	}
	r := new(dns.Msg)
	if err := r.Unpack(raw); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if !r.Response {
		// A server echoing queries back (a reflector, a loop) is not
		// answering them.
		return nil, fmt.Errorf("%w: the QR bit is clear", ErrMalformed)
	}
	if r.Rcode == dns.RcodeRefused {
		return nil, ErrRefused
	}
	if !sameQuestion(q.Question, r.Question) {
		return nil, fmt.Errorf("%w: asked %s, answered %s",
			ErrQuestionMismatch, questionString(q.Question), questionString(r.Question))
	}
	r.Id = q.Id
	return r, nil
}

// truncatedHeader reports whether raw has a whole header with the TC bit
// set. It lets a UDP truncated answer that does not even parse (some
// servers cut records in half) still be retried over TCP.
func truncatedHeader(raw []byte) bool {
	return len(raw) >= dnsmsg.HeaderLen && dnsmsg.Flags(raw)&dnsmsg.FlagTC != 0
}

// sameQuestion compares question sections the way a resolver must: names
// case-insensitively (RFC 4343; some servers randomise case, RFC draft
// "0x20"), type and class exactly.
func sameQuestion(a, b []dns.Question) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Qtype != b[i].Qtype || a[i].Qclass != b[i].Qclass || !strings.EqualFold(a[i].Name, b[i].Name) {
			return false
		}
	}
	return true
}

// questionString renders a question section for error messages.
func questionString(qs []dns.Question) string {
	if len(qs) == 0 {
		return "no question"
	}
	parts := make([]string, len(qs))
	for i, q := range qs {
		parts[i] = fmt.Sprintf("%s %s %s", q.Name, dns.Class(q.Qclass), dns.Type(q.Qtype))
	}
	return strings.Join(parts, ", ")
}
