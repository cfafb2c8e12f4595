package server

import (
	"hash/maphash"
	"net/netip"
	"sync"
	"sync/atomic"
)

// Fair shares: one client must not take every query permit or every TCP
// connection of a server (issue 16: one TCP connection pipelining 5,000
// queries to a stalling upstream held all 4,096 permits, and 1,100
// reconnecting idle clients of one address all 1,024 connections, while
// every other client was refused). Three bounds, each below the server's
// own:
//
//   - a TCP connection has at most MaxQueriesPerConnection queries being
//     served; its read loop reads no further query until one is answered,
//     so a pipelining client waits, as TCP's flow control then makes it
//     wait, instead of being refused;
//   - a client address has at most MaxClientQueries queries being served,
//     UDP and TCP together; one past it is answered REFUSED, as one past
//     MaxConcurrentQueries is;
//   - a client address has at most MaxClientTCPConnections connections
//     open; one past it is closed as soon as it is accepted.

// DefaultMaxQueriesPerConnection is the default bound on the queries of one
// client TCP connection being served at once: Knot Resolver's default TCP
// pipeline limit. Stubs that pipeline (systemd-resolved, glibc's
// single-request mode, dnsdist) keep a handful in flight.
const DefaultMaxQueriesPerConnection = 100

// minClientShare is the least ClientShare gives a client: with small
// limits a quarter would leave one client next to nothing.
const minClientShare = 16

// ClientShare is the default share of one client address in a server-wide
// limit n (MaxConcurrentQueries, MaxTCPConnections): a quarter of it, so
// that a flood from one address leaves three quarters to everyone else,
// but at least minClientShare (16) and never more than n.
func ClientShare(n int) int {
	return min(n, max(n/4, minClientShare))
}

// clientBuckets is the size of the table that counts the queries in
// flight per client address. Two addresses whose keyed hashes meet share
// one count and so one share; the key is random per server, so a client
// cannot choose whose count it shares, and with this many buckets two
// given clients meet with odds of 1 in 16,384.
const clientBuckets = 1 << 14

// clientCounts counts the queries being served per client address,
// approximately: in a fixed table of counters indexed by a keyed hash of
// the address, so that admission takes no lock and allocates nothing.
// A client is an address, all 16 bytes of it: a port does not make
// another client, but every IPv6 address is a client of its own, not its
// /64. nxdnsd serves a LAN, and there a /64 is every host of the link
// (fe80::/64 every host's link-local address): counting prefixes would
// make the whole LAN one client. A host's temporary addresses (RFC 8981)
// change over hours and it sends from one at a time, so an address is,
// near enough, a host. The upstream pool's client shares
// (actors/share.go) count clients the same way.
type clientCounts struct {
	seed   maphash.Seed // random per server, never shown
	counts [clientBuckets]atomic.Int32
}

func newClientCounts() *clientCounts {
	return &clientCounts{seed: maphash.MakeSeed()}
}

// count returns the counter of a's queries.
func (c *clientCounts) count(a netip.Addr) *atomic.Int32 {
	a = a.Unmap() // one address, one form (the listeners unmap already)
	if a.Is4() {
		// Four bytes, not the sixteen of its mapped form: As16's array
		// is copied from two stores into one wider load, which waits
		// for them.
		b := a.As4()
		return &c.counts[maphash.Bytes(c.seed, b[:])%clientBuckets]
	}
	b := a.As16()
	return &c.counts[maphash.Bytes(c.seed, b[:])%clientBuckets]
}

// connSlots bounds the queries of one TCP connection being served: a
// counting semaphore, a token per query.
type connSlots chan struct{}

// take waits for a slot, and reports false, without one, when done is
// closed first (Shutdown has begun).
func (c connSlots) take(done <-chan struct{}) bool {
	select {
	case c <- struct{}{}:
		return true
	default:
	}
	select {
	case c <- struct{}{}:
		return true
	case <-done:
		return false
	}
}

// give returns a slot taken by take.
func (c connSlots) give() { <-c }

// Admission is the admission state that bounds the queries and the client
// TCP connections of one or several Servers together: the queries being
// served (MaxConcurrentQueries), their count per client address
// (MaxClientQueries), and the TCP connections open, in all and per client
// address (MaxTCPConnections, MaxClientTCPConnections). A daemon that
// serves its listen addresses with a Server each gives them one Admission,
// so that its limits hold for the daemon, not for each address. A Server
// without one makes its own.
type Admission struct {
	inflight atomic.Int64 // admitted queries not yet released
	clients  *clientCounts

	mu         sync.Mutex         // guards following
	conns      int                // client TCP connections open
	connsPerIP map[netip.Addr]int // how many of them each client address has; no zero entries
}

// NewAdmission returns admission state for Servers to share.
func NewAdmission() *Admission {
	return &Admission{clients: newClientCounts(), connsPerIP: make(map[netip.Addr]int)}
}

// takeConn counts a client TCP connection of ip unless max are open, or
// maxPerIP of ip's, and reports whether it did.
func (a *Admission) takeConn(ip netip.Addr, max, maxPerIP int) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.conns >= max || a.connsPerIP[ip] >= maxPerIP {
		return false
	}
	a.conns++
	a.connsPerIP[ip]++
	return true
}

// giveConn uncounts a connection takeConn counted.
func (a *Admission) giveConn(ip netip.Addr) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.conns--
	if a.connsPerIP[ip]--; a.connsPerIP[ip] <= 0 {
		delete(a.connsPerIP, ip)
	}
}
