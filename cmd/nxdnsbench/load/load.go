// Package load is nxdnsd's own small DNS load client: a fixed number of
// queries in flight over UDP, each with its own timeout, every latency
// kept, so that a benchmark can report percentiles and count every answer,
// SERVFAIL, REFUSED and timeout. dnsperf measures throughput; this measures
// what each query went through.
package load

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Limits that keep a run bounded whatever its configuration says.
const (
	// MaxQueries bounds one run's queries, and so the latencies it keeps.
	MaxQueries = 20_000_000

	// MaxInFlight bounds the workers, each a goroutine with a socket.
	MaxInFlight = 4096

	// readBufLen holds any answer to our queries, which carry no EDNS and
	// so get at most 512 bytes; the margin covers servers that ignore that.
	readBufLen = 4096
)

// Config is one run.
type Config struct {
	// Server is the UDP address to query.
	Server netip.AddrPort

	// Queries is the number of queries to send; 0 means until Duration.
	Queries int

	// Duration stops sending new queries after this long; 0 means until
	// Queries. A run also never outlives Duration plus one Timeout.
	Duration time.Duration

	// InFlight is the number of queries outstanding at once: each of as
	// many workers sends its next query when the last one ended.
	InFlight int

	// Timeout is how long a query waits for its answer.
	Timeout time.Duration

	// Prefix starts every query name: names are PREFIX<worker>-<n>.bench.example.,
	// each asked once, so that no cache can answer them.
	Prefix string

	// Names, when above 0, makes the workers share Names names instead,
	// PREFIX0-<0..Names-1>.bench.example., asked over and over: after
	// the first round a cache answers them (the hit path's latency).
	Names int
}

// Result is what a run saw.
type Result struct {
	Sent     int
	Rcodes   [16]int // answers by rcode
	Timeouts int     // queries that got no answer within Timeout
	Errors   int     // queries that could not be sent or read: socket errors
	Unsent   int     // queries of Config.Queries never sent: the run ran out of time
	Elapsed  time.Duration

	// Latencies of every answered query, whatever its rcode, sorted.
	Latencies []time.Duration
}

// Answered returns the number of answers of any rcode.
func (r *Result) Answered() int { return len(r.Latencies) }

// Percentile returns the latency below which a fraction p (0..1) of the
// answered queries fall, by the nearest-rank method; 0 with no answers.
func (r *Result) Percentile(p float64) time.Duration {
	n := len(r.Latencies)
	if n == 0 {
		return 0
	}
	i := int(p*float64(n)+0.999999) - 1
	return r.Latencies[min(max(i, 0), n-1)]
}

// Mean returns the mean latency of the answered queries.
func (r *Result) Mean() time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	var sum time.Duration
	for _, l := range r.Latencies {
		sum += l
	}
	return sum / time.Duration(len(r.Latencies))
}

// QPS returns the answers per second of the run.
func (r *Result) QPS() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Answered()) / r.Elapsed.Seconds()
}

// Run sends the configured queries and waits for every one of them to be
// answered or to time out. It stops early, with what it saw so far, when
// ctx is done.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	switch {
	case !cfg.Server.IsValid():
		return nil, errors.New("load: no server")
	case cfg.Queries < 0 || cfg.Queries > MaxQueries:
		return nil, fmt.Errorf("load: %d queries, want 0..%d", cfg.Queries, MaxQueries)
	case cfg.Queries == 0 && cfg.Duration <= 0:
		return nil, errors.New("load: neither a query count nor a duration")
	case cfg.InFlight < 1 || cfg.InFlight > MaxInFlight:
		return nil, fmt.Errorf("load: %d in flight, want 1..%d", cfg.InFlight, MaxInFlight)
	case cfg.Timeout <= 0:
		return nil, errors.New("load: no timeout")
	case cfg.Names < 0:
		return nil, errors.New("load: negative Names")
	case len(cfg.Prefix) > maxPrefixLen:
		return nil, fmt.Errorf("load: prefix %q longer than %d bytes", cfg.Prefix, maxPrefixLen)
	}
	limit := cfg.Queries
	if limit == 0 {
		limit = MaxQueries
	}
	start := time.Now()
	stopSending := time.Time{}
	if cfg.Duration > 0 {
		stopSending = start.Add(cfg.Duration)
	}

	var next atomic.Int64 // queries claimed by the workers
	// Separate allocations, so that no two workers' counters share a
	// cache line.
	workers := make([]*worker, cfg.InFlight)
	var wg sync.WaitGroup
	for i := range workers {
		w := &worker{id: i, cfg: &cfg}
		workers[i] = w
		wg.Go(func() { w.run(ctx, &next, int64(limit), stopSending) })
	}
	wg.Wait()

	res := &Result{Elapsed: time.Since(start)}
	for _, w := range workers {
		res.Sent += w.sent
		res.Timeouts += w.timeouts
		res.Errors += w.errors
		for rc, n := range w.rcodes {
			res.Rcodes[rc] += n
		}
		res.Latencies = append(res.Latencies, w.latencies...)
	}
	if cfg.Queries > 0 {
		res.Unsent = cfg.Queries - res.Sent
	}
	slices.Sort(res.Latencies)
	return res, ctx.Err()
}

// worker sends one query at a time on a socket of its own. Its fields are
// written only by its own goroutine and read after it ended.
type worker struct {
	id  int
	cfg *Config

	sent, timeouts, errors int
	rcodes                 [16]int
	latencies              []time.Duration
}

func (w *worker) run(ctx context.Context, next *atomic.Int64, limit int64, stopSending time.Time) {
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(w.cfg.Server))
	if err != nil {
		// Every query this worker would have sent goes to the others.
		w.errors++
		return
	}
	defer c.Close()
	// Unblock a read in progress when the run is cancelled.
	stop := context.AfterFunc(ctx, func() { _ = c.SetReadDeadline(time.Now()) })
	defer stop()

	rng := rand.New(rand.NewPCG(uint64(w.id), uint64(time.Now().UnixNano())))
	query := make([]byte, 0, 512)
	buf := make([]byte, readBufLen)
	for seq := 0; ctx.Err() == nil; seq++ {
		if !stopSending.IsZero() && !time.Now().Before(stopSending) {
			return
		}
		if next.Add(1) > limit {
			return
		}
		id := uint16(rng.Uint32())
		wid, n := w.name(seq)
		query = appendQuery(query[:0], id, w.cfg.Prefix, wid, n)
		w.exchange(c, query, buf)
	}
}

// name is the worker's query seq's name, PREFIX<wid>-<n>: its own
// names, or with Names the shared ones, each worker starting from its
// own place in them.
func (w *worker) name(seq int) (wid, n int) {
	if w.cfg.Names > 0 {
		return 0, (w.id*7919 + seq) % w.cfg.Names
	}
	return w.id, seq
}

// exchange sends one query and waits for its answer: a datagram with its
// ID and its question, QR set. Anything else read meanwhile is a late
// answer to an earlier query that timed out, and is skipped.
func (w *worker) exchange(c *net.UDPConn, query, buf []byte) {
	sent := time.Now()
	deadline := sent.Add(w.cfg.Timeout)
	if err := c.SetReadDeadline(deadline); err != nil {
		w.errors++
		return
	}
	if _, err := c.Write(query); err != nil {
		w.errors++
		return
	}
	w.sent++
	question := query[headerLen:]
	for {
		n, err := c.Read(buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				w.timeouts++
			} else {
				w.errors++
			}
			return
		}
		b := buf[:n]
		if n < len(query) || binary.BigEndian.Uint16(b) != binary.BigEndian.Uint16(query) ||
			b[2]&0x80 == 0 || string(b[headerLen:len(query)]) != string(question) {
			continue
		}
		w.latencies = append(w.latencies, time.Since(sent))
		w.rcodes[b[3]&0x0F]++
		return
	}
}

const (
	headerLen = 12

	// maxPrefixLen leaves room in the first label (63 bytes at most) for
	// the worker number and a sequence number of up to 20 digits.
	maxPrefixLen = 63 - 4 - 1 - 20
)

// appendQuery appends a query for PREFIX<worker>-<seq>.bench.example. A,
// RD set, no EDNS, to b.
func appendQuery(b []byte, id uint16, prefix string, worker, seq int) []byte {
	b = binary.BigEndian.AppendUint16(b, id)
	b = append(b, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0) // RD; one question
	lenAt := len(b)
	b = append(b, 0)
	b = append(b, prefix...)
	b = strconv.AppendInt(b, int64(worker), 10)
	b = append(b, '-')
	b = strconv.AppendInt(b, int64(seq), 10)
	b[lenAt] = byte(len(b) - lenAt - 1)
	b = append(b, 5, 'b', 'e', 'n', 'c', 'h', 7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 0)
	return append(b, 0, 1, 0, 1) // A, IN
}
