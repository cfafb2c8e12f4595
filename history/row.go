// Package history keeps every client query as a row (spec section 12): a
// bounded queue the query path hands rows to without waiting, one writer
// goroutine that owns the database connection and writes them in
// batches, retention by age and size, and the HTTP API that reads them
// (/api/history, /api/stats/top, /api/stats/timeline).
//
// The rows live in SQLite (modernc.org/sqlite, pure Go) behind the small
// store interface, so that a shared PostgreSQL history (spec section 16)
// can take its place without touching the queue or the API.
package history

import (
	"net/netip"
	"time"
)

// Row is one answered client query, the query-log fields of spec section
// 6. The query path fills it from its query.Entry (and the blocking and
// client-name steps from what they decided) and hands it to Record by
// value: strings are kept as they are, never copied, so a Row costs no
// allocation of its own.
type Row struct {
	Time       time.Time     // when the query arrived (query.Entry.Time)
	Client     netip.Addr    // the client's address, without the port; the zero Addr when unknown
	ClientName string        // the client's name (spec section 15), "" when it has none
	Proto      string        // "udp", "tcp", "tls", "https"
	QName      string        // the question's name as asked; "" when the query had no readable question
	QType      uint16        // the question's type; 0 with QName ""
	Rcode      int           // the rcode sent, extended bits included
	Source     string        // query.Source* or "blocked"; "" when answered before resolution (FORMERR, NOTIMP)
	Upstream   string        // the pool's attribution or the forward zone's resolver; "" for none
	Duration   time.Duration // from arrival to the packed answer
	List       string        // the blocklist that blocked the name (source "blocked"); "" otherwise
}

// queued is a Row as it waits in the queue: 112 bytes where a Row takes
// 168, so that the queue's 32,768 rows hold 3.5 MiB rather than 5.3 (the
// queue is the history's largest block of memory, all of it touched
// once the ring has gone round). The time is kept as Unix nanoseconds,
// the proto and source as their stored codes.
type queued struct {
	client                            netip.Addr
	clientName, qname, upstream, list string
	unixNano                          int64
	duration                          time.Duration
	rcode                             int32
	qtype                             uint16
	proto, source                     uint8
}

// queue returns r as it waits in the queue.
func queue(r *Row) queued {
	return queued{
		client: r.Client, clientName: r.ClientName, qname: r.QName, upstream: r.Upstream, list: r.List,
		unixNano: r.Time.UnixNano(), duration: r.Duration, rcode: int32(r.Rcode), qtype: r.QType,
		proto: uint8(protoCode(r.Proto)), source: uint8(sourceCode(r.Source)),
	}
}

// row returns the Row q holds: its time in the local zone, its proto and
// source as stored (an unknown one as none, as the stores keep it).
func (q *queued) row() Row {
	return Row{
		Time: time.Unix(0, q.unixNano), Client: q.client, ClientName: q.clientName, Proto: protos[q.proto],
		QName: q.qname, QType: q.qtype, Rcode: int(q.rcode), Source: sources[q.source],
		Upstream: q.upstream, Duration: q.duration, List: q.list,
	}
}

// Sources as stored: a small integer per spec section 6 value. The order
// is the on-disk format; append only. The commonest come first, since
// SQLite stores 0 and 1 in no bytes at all.
var sources = [...]string{"cache", "pool", "stale", "blocked", "forward_zone", "local", "special", "refused", ""}

// sourceNone is the code of "" (and of a source this version does not
// know, which is stored as none rather than refused).
const sourceNone = len(sources) - 1

// protos as stored; protoNone is "" and anything unknown.
var protos = [...]string{"udp", "tcp", "tls", "https", ""}

const protoNone = len(protos) - 1

// sourceCode and protoCode are the codes of sources and protos, by
// switch: the query path calls them (queue), and a switch compares by
// length first (TestCodesMatchTables).
func sourceCode(s string) int {
	switch s {
	case "cache":
		return 0
	case "pool":
		return 1
	case "stale":
		return 2
	case "blocked":
		return 3
	case "forward_zone":
		return 4
	case "local":
		return 5
	case "special":
		return 6
	case "refused":
		return 7
	}
	return sourceNone
}

func protoCode(p string) int {
	switch p {
	case "udp":
		return 0
	case "tcp":
		return 1
	case "tls":
		return 2
	case "https":
		return 3
	}
	return protoNone
}

// flags packs what a row says in small numbers into one integer column:
// proto in bits 0-2, source in bits 3-6, the rcode above. A cache hit over
// UDP with NOERROR is 0, stored in no bytes.
func flags(proto, source, rcode int) int64 {
	return int64(proto) | int64(source)<<3 | int64(rcode)<<7
}

func unflags(f int64) (proto, source, rcode int) {
	proto, source, rcode = int(f&7), int(f>>3&15), int(f>>7)
	if proto >= len(protos) {
		proto = protoNone
	}
	if source >= len(sources) {
		source = sourceNone
	}
	return proto, source, rcode
}

// Outcomes of the timeline (spec section 12): every row counts in exactly
// one.
const (
	outForwarded = iota
	outCached
	outBlocked
	outFailed
	outLocal
	numOutcomes
)

const rcodeServFail = 2

// outcome classifies a row for the timeline: failed (SERVFAIL, whatever
// the source), else blocked, cached (cache, stale), forwarded (pool,
// forward_zone), local (the rest).
func outcome(source, rcode int) int {
	switch {
	case rcode == rcodeServFail:
		return outFailed
	case sources[source] == "blocked":
		return outBlocked
	case sources[source] == "cache" || sources[source] == "stale":
		return outCached
	case sources[source] == "pool" || sources[source] == "forward_zone":
		return outForwarded
	}
	return outLocal
}
