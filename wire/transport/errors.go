package transport

import "errors"

// Sentinel errors of the transports. Each is placed in an error group by
// actors.Classify, whose test reads this package's source so that none can
// be forgotten.
var (
	// ErrRefused: the upstream answered REFUSED.
	ErrRefused = errors.New("upstream refused the query")

	// ErrIDMismatch: the answer's ID is not the query's.
	ErrIDMismatch = errors.New("answer ID does not match the query")

	// ErrQuestionMismatch: the answer's question is not the query's.
	ErrQuestionMismatch = errors.New("answer question does not match the query")

	// ErrMalformed: the answer could not be parsed.
	ErrMalformed = errors.New("malformed answer")

	// ErrPack: the query could not be encoded. It is our fault, not the
	// upstream's.
	ErrPack = errors.New("packing the query")

	// ErrResolverTimeout: a forward-zone resolver did not answer within the
	// read timeout (UDP, and TCP after truncation, together). The
	// forward-zone client (query/forward) returns it; it is declared here
	// beside the other sentinels, which IsTimeout and actors.Classify know. It is peer
	// evidence about that resolver, never a budget: it deliberately does not
	// match context.DeadlineExceeded.
	ErrResolverTimeout = errors.New("resolver timed out")

	// ErrHTTPStatus: a DoH server answered with a status other than 200.
	ErrHTTPStatus = errors.New("DoH server answered with an HTTP error")

	// ErrContentType: a DoH server answered 200 with a body that is not
	// application/dns-message (a captive portal's page, a proxy's error).
	ErrContentType = errors.New("DoH answer is not application/dns-message")

	// ErrBootstrap: the host name of a DoT or DoH upstream without ip could
	// not be resolved (see HostResolver): the bootstrap resolvers failed,
	// or there are none. It says nothing about the upstream, which was
	// never reached: a local error.
	ErrBootstrap = errors.New("resolving the upstream's host name")
)
