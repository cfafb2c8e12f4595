package actors

import (
	"context"
	"errors"
	"net"
	"syscall"

	"github.com/nxdnsd/nxdnsd/wire/transport"
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
	// buffers, memory, ports), could not even encode the query, or has no
	// way to the upstream at all (no route, network down: see
	// routeErrnos). Not the upstream's fault: nothing is recorded, for
	// attempts and probes alike. After a missing route the query fails
	// over (another upstream may have one); after anything else it answers
	// SERVFAIL.
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
// else's). A test reads wire/transport's source for its sentinels, so a
// new one cannot be added without deciding here who is to blame for it.
var sentinelGroups = [...]struct {
	err   error
	group Group
}{
	// A failed bootstrap lookup never reached the upstream, whatever its
	// cause says (a bootstrap resolver's REFUSED or timeout is not the
	// upstream's): first, so that nothing it wraps can place it.
	{transport.ErrBootstrap, GroupLocalResource},
	{transport.ErrPack, GroupLocalResource},
	{transport.ErrRefused, GroupPeerFault},
	{transport.ErrIDMismatch, GroupPeerFault},
	{transport.ErrQuestionMismatch, GroupPeerFault},
	{transport.ErrMalformed, GroupPeerFault},
	{transport.ErrResolverTimeout, GroupPeerFault}, // forward zones: the resolver's own timeout
	{transport.ErrHTTPStatus, GroupPeerFault},
	{transport.ErrContentType, GroupPeerFault},
}

// localErrnos are the system errors that mean this host, not the
// upstream, ran out of something or cannot send at all, however they
// were reported.
var localErrnos = [...]syscall.Errno{
	syscall.EMFILE,        // per-process descriptor limit
	syscall.ENFILE,        // system-wide descriptor limit
	syscall.ENOBUFS,       // socket buffers
	syscall.ENOMEM,        // kernel memory
	syscall.EADDRNOTAVAIL, // ephemeral ports exhausted, or the source address is gone (DHCP lease lost, interface renumbered)
	syscall.ENETDOWN,      // the interface the route uses is down
}

// routeErrnos mean "no way there". Who said so decides whose fault it is.
//
// Reported by this host's own stack when a socket connects or sends
// (net.OpError's Op "dial" or "write", or a bare errno): the kernel has
// no route, or the route is an unreachable one, or the next hop on the
// local link does not answer. That is a dead link, not a dead upstream:
// a local error, recorded against nobody, and the query fails over. When
// the link comes back the upstream is as healthy as it was.
//
// Read from a socket afterwards (Op "read"): a router on the path, or the
// upstream's own host, sent an ICMP destination unreachable about a
// datagram we sent. The UDP transport delivers such an error only to the
// exchange whose query the ICMP message quotes (wire/transport/udp.go), so it is a
// statement about this upstream's reachability from here, and we take it
// as one: a peer fault, recorded like a timeout. If the whole network is
// gone every upstream hears the same, every upstream goes into backoff,
// and the all-down rule (probes every backoff_ms) brings service back
// within about backoff_ms of the network. The same holds for a TCP
// connection that was up and then lost its path (a read error).
//
// One case reads as local although a router said it: a TCP connect that
// ends with EHOSTUNREACH because an ICMP host unreachable answered the
// SYN. The kernel reports it from connect, exactly as it reports a local
// neighbour (ARP) failure, and the two cannot be told apart; it records
// nothing and costs each query one round trip to that router before the
// failover. (A gateway that stops answering ARP is seen by UDP sockets as
// an ICMP host unreachable from our own address after about 3 s; the
// attempt or probe has expired by then, and the expiry is recorded: the
// all-down rule covers it.)
var routeErrnos = [...]syscall.Errno{
	syscall.ENETUNREACH,  // no route to the network
	syscall.EHOSTUNREACH, // no route to the host, an unreachable route, or neighbour resolution failed
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
		for _, e := range routeErrnos {
			if errno == e && !fromPath(err) {
				return GroupLocalResource
			}
		}
	}
	return GroupPeerFault
}

// NoRoute reports whether err says this host has no way to the upstream
// right now (see routeErrnos and localErrnos, and a failed bootstrap
// lookup of the upstream's host name, transport.ErrBootstrap): a local error
// after which a query fails over to the next upstream, since another may
// have a route, instead of ending at once.
func NoRoute(err error) bool {
	if errors.Is(err, transport.ErrBootstrap) {
		return true
	}
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return false
	}
	switch errno {
	case syscall.EADDRNOTAVAIL, syscall.ENETDOWN:
		return true
	}
	for _, e := range routeErrnos {
		if errno == e {
			return !fromPath(err)
		}
	}
	return false
}

// fromPath reports whether err was read from a socket after the fact (an
// ICMP error about a datagram sent earlier, or a connection that lost its
// path) rather than returned by this host's stack as it connected or sent.
func fromPath(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "read"
}
