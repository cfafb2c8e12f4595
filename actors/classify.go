package actors

import (
	"context"
	"errors"
	"syscall"

	"github.com/nxdnsd/nxdnsd/wire"
)

// Group is what an error says about who is at fault, and so what the pool
// does with it. Every error an attempt can return falls in exactly one group.
type Group uint8

const (
	// GroupPeerFault: the upstream misbehaved or could not be reached —
	// a timeout of its own, a refused or reset connection, a TLS or HTTP
	// failure, REFUSED, a mismatched or malformed answer. Evidence against
	// the upstream: health records a failure and the pool fails over.
	GroupPeerFault Group = iota
	// GroupLocalResource: this host ran out of something (file descriptors,
	// buffers, memory, ports) or could not even encode the query. Not the
	// upstream's fault: nothing is recorded and the query answers SERVFAIL.
	GroupLocalResource
	// GroupCanceled: the client's query was cancelled. Nothing is recorded.
	GroupCanceled
	// GroupBudgetExhausted: the query's own deadline ran out. Evidence
	// about the pool's budget, never about an upstream.
	GroupBudgetExhausted
)

func (g Group) String() string {
	switch g {
	case GroupPeerFault:
		return "peer_fault"
	case GroupLocalResource:
		return "local_resource"
	case GroupCanceled:
		return "canceled"
	case GroupBudgetExhausted:
		return "budget_exhausted"
	}
	return "unknown"
}

// sentinelGroups places every sentinel the transports declare, in the
// order Classify tries them: an error that wraps two sentinels is placed by
// the first listed (a local failure to pack is ours before it is anyone
// else's). A test checks it against wire.Sentinels, so a new sentinel cannot
// be added without deciding here who is to blame for it.
var sentinelGroups = [...]struct {
	err   error
	group Group
}{
	{wire.ErrPack, GroupLocalResource},
	{wire.ErrRefused, GroupPeerFault},
	{wire.ErrIDMismatch, GroupPeerFault},
	{wire.ErrQuestionMismatch, GroupPeerFault},
	{wire.ErrMalformed, GroupPeerFault},
	{wire.ErrResolverTimeout, GroupPeerFault}, // forward zones: the resolver's own timeout
	{wire.ErrHTTPStatus, GroupPeerFault},
	{wire.ErrContentType, GroupPeerFault},
}

// localErrnos are the system errors that mean this host, not the
// upstream, ran out of something.
var localErrnos = [...]syscall.Errno{
	syscall.EMFILE,        // per-process descriptor limit
	syscall.ENFILE,        // system-wide descriptor limit
	syscall.ENOBUFS,       // socket buffers
	syscall.ENOMEM,        // kernel memory
	syscall.EADDRNOTAVAIL, // ephemeral ports exhausted
}

// Classify places err in its group. It is the one place that decides, and
// it decides in a fixed order: the query's cancellation, the budget, the
// sentinels as sentinelGroups lists them, then local system errors.
// Errors nobody placed deliberately are peer faults: an attempt that
// completed with an error we do not recognise came from talking to the
// upstream, and the transport is the place to say otherwise.
func Classify(err error) Group {
	switch {
	case errors.Is(err, context.Canceled):
		return GroupCanceled
	case errors.Is(err, ErrBudgetExhausted):
		// No transport of ours returns it; one that wraps a pool of its
		// own may.
		return GroupBudgetExhausted
	}
	for _, s := range sentinelGroups {
		if errors.Is(err, s.err) {
			return s.group
		}
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		for _, e := range localErrnos {
			if errno == e {
				return GroupLocalResource
			}
		}
	}
	return GroupPeerFault
}
