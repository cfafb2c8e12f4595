package server

import (
	"net/netip"
	"sync"
	"sync/atomic"
)

// clientQueryBufLen is the capacity of a pooled query buffer: it holds any
// ordinary query (a name of at most 255 bytes, an OPT record with a cookie
// and padding), so the common case never allocates.
const clientQueryBufLen = 512

// clientAnswerBufLen is the capacity of a pooled UDP answer buffer: any
// answer to a client advertising up to 4096 bytes of EDNS payload, plus the
// OPT record a handler may add.
const clientAnswerBufLen = 4096 + 64

// clientQuery is an admitted query's Request with the memory behind Raw, pooled
// so that a busy server does not allocate both for every query.
type clientQuery struct {
	req   Request
	buf   []byte
	out   []byte        // for Request.Answer; allocated on first use
	count *atomic.Int32 // the client's count of queries in flight, from admit
	udp   udpReturn     // a UDP query's way back; zero for a stream's
}

var clientQueries = sync.Pool{
	New: func() any { return &clientQuery{buf: make([]byte, clientQueryBufLen)} },
}

// getClientQuery returns a query whose Raw has room for n bytes.
func getClientQuery(n int, proto string, client netip.AddrPort) *clientQuery {
	q := clientQueries.Get().(*clientQuery)
	if cap(q.buf) < n {
		q.buf = make([]byte, n)
	}
	// Field by field after a zeroing, as take sets q.udp.
	r := &q.req
	*r = Request{}
	r.Raw, r.Proto, r.Client = q.buf[:n], proto, client
	return q
}

// putClientQuery gives q back once nothing refers to its Raw any more. A buffer
// grown for a large query is dropped rather than kept in the pool.
func putClientQuery(q *clientQuery) {
	if cap(q.buf) > clientQueryBufLen {
		return
	}
	q.req, q.count, q.udp = Request{}, nil, udpReturn{}
	clientQueries.Put(q)
}
