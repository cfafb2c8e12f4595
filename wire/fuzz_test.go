package wire

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// The fuzz targets of the wire package. Their seed corpora are the f.Add
// calls below and the files in testdata/fuzz/<FuzzName>/ (Go's corpus
// format; `go test -fuzz` also writes its findings there). .ci/run runs
// each for a few seconds; a longer run is
//
//	go test -run '^$' -fuzz '^FuzzDecodeReply$' -fuzztime 10m -parallel 1 ./wire/

// fuzzWireID is the wire ID FuzzDecodeReply's query was sent with; the
// query's own ID differs, to prove that it is restored.
const fuzzWireID = 0x1234

// fuzzReplyQuery is the query FuzzDecodeReply's answers answer: mixed case
// and EDNS with DO, as a client might send it.
func fuzzReplyQuery() *dns.Msg {
	q := new(dns.Msg).SetQuestion("Www.Example.org.", dns.TypeA)
	q.Id = 0xBEEF
	q.SetEdns0(1232, true)
	return q
}

// FuzzDecodeReply feeds whatever an upstream might send to decodeReply,
// the check every transport applies to an answer: it must never panic, and
// either reject the bytes with one of the peer-fault sentinels (the pool
// then fails over) or return a response to the very question asked, with
// the query's ID restored and the query left untouched.
func FuzzDecodeReply(f *testing.F) {
	for _, b := range fuzzReplySeeds(f) {
		f.Add(b)
	}
	q := fuzzReplyQuery()
	sent := pack(f, q)
	peerFaults := []error{ErrMalformed, ErrIDMismatch, ErrRefused, ErrQuestionMismatch}

	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := decodeReply(q, fuzzWireID, raw)
		if after := pack(t, q); !slices.Equal(after, sent) {
			t.Fatalf("decodeReply modified the query:\n%x\nwas\n%x", after, sent)
		}
		if err != nil {
			if r != nil {
				t.Fatalf("decodeReply returned an answer along with %v", err)
			}
			if !slices.ContainsFunc(peerFaults, func(s error) bool { return errors.Is(err, s) }) {
				t.Fatalf("error %v is none of the peer-fault sentinels", err)
			}
			return
		}
		if r == nil {
			t.Fatal("decodeReply returned neither an answer nor an error")
		}
		if got := binary.BigEndian.Uint16(raw); got != fuzzWireID {
			t.Fatalf("accepted an answer with wire ID %#x, sent %#x", got, fuzzWireID)
		}
		if r.Id != q.Id {
			t.Fatalf("answer ID %#x, want the query's %#x restored", r.Id, q.Id)
		}
		if !r.Response {
			t.Fatal("accepted a message with QR clear")
		}
		if r.Rcode == dns.RcodeRefused {
			t.Fatal("accepted REFUSED as an answer")
		}
		if len(r.Question) != 1 || !strings.EqualFold(r.Question[0].Name, q.Question[0].Name) ||
			r.Question[0].Qtype != q.Question[0].Qtype || r.Question[0].Qclass != q.Question[0].Qclass {
			t.Fatalf("accepted question %v for %v", r.Question, q.Question)
		}
	})
}

// fuzzReplySeeds are answers to fuzzReplyQuery, packed with fuzzWireID:
// good ones, and each kind of fault a transport must recognise.
func fuzzReplySeeds(tb testing.TB) [][]byte {
	tb.Helper()
	q := fuzzReplyQuery()
	reply := func(edit func(r *dns.Msg)) []byte {
		r := new(dns.Msg).SetReply(q)
		r.Id = fuzzWireID
		r.RecursionAvailable = true
		edit(r)
		return pack(tb, r)
	}
	a := func(i int) dns.RR {
		return &dns.A{Hdr: dns.RR_Header{Name: "www.example.org.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
			A: net.IPv4(192, 0, 2, byte(i))}
	}
	answered := reply(func(r *dns.Msg) {
		r.Answer = []dns.RR{a(1)}
		r.SetEdns0(1232, true)
	})
	seeds := [][]byte{
		answered,
		reply(func(r *dns.Msg) { r.Question[0].Name = "WWW.EXAMPLE.ORG." }), // 0x20 case
		reply(func(r *dns.Msg) { r.Rcode = dns.RcodeServerFailure }),
		reply(func(r *dns.Msg) { r.Rcode = dns.RcodeNameError; r.Answer = nil }),
		reply(func(r *dns.Msg) { r.Rcode = dns.RcodeRefused }),
		reply(func(r *dns.Msg) { r.Rcode = dns.RcodeRefused; r.Question = nil }), // header-only REFUSED
		reply(func(r *dns.Msg) { r.Id++ }),
		reply(func(r *dns.Msg) { r.Question[0].Name = "wrong.example." }),
		reply(func(r *dns.Msg) { r.Question[0].Qtype = dns.TypeAAAA }),
		reply(func(r *dns.Msg) { r.Question = append(r.Question, r.Question[0]) }),
		reply(func(r *dns.Msg) { r.Response = false }), // the query echoed
		reply(func(r *dns.Msg) { r.Truncated = true }),
		reply(func(r *dns.Msg) { // oversized: far past any UDP size
			for i := range 300 {
				r.Answer = append(r.Answer, a(i))
			}
		}),
		reply(func(r *dns.Msg) { r.SetEdns0(4096, true); r.Rcode = dns.RcodeBadCookie }),
		answered[:len(answered)-5], // cut short
		answered[:HeaderLen],
		answered[:HeaderLen-1],
		{},
		// A compression pointer that points at itself.
		{0x12, 0x34, 0x81, 0x80, 0, 1, 0, 0, 0, 0, 0, 0, 0xC0, 0x0C, 0, 1, 0, 1},
	}
	trunc := reply(func(r *dns.Msg) { r.Truncated = true; r.Answer = []dns.RR{a(1), a(2)} })
	seeds = append(seeds, trunc[:len(trunc)-7]) // TC set, cut in the middle of a record
	return seeds
}

// FuzzServerTCP streams arbitrary bytes at a real server's TCP listener,
// as one client connection that then half-closes: length prefixes that
// lie, zero-length messages, frames too short for a header, responses,
// queries that make the handler panic. Every complete frame with a header
// and QR clear, up to the first zero-length frame, must be answered
// exactly once with a frame that parses and carries its ID; nothing else
// is answered; then the server closes the connection. The handler must
// never see a query shorter than a header.
func FuzzServerTCP(f *testing.F) {
	q := func(id uint16, name string) []byte { return pack(f, newQuery(id, name)) }
	frame := func(msgs ...[]byte) []byte {
		var b []byte
		for _, m := range msgs {
			b = binary.BigEndian.AppendUint16(b, uint16(len(m)))
			b = append(b, m...)
		}
		return b
	}
	response := q(3, "response.example.")
	response[2] |= 0x80
	f.Add(frame(q(1, "example.org.")))
	f.Add(frame(q(1, "example.org."), q(2, "example.net."), q(1, "example.org.")))
	f.Add(frame(q(fuzzPanicID, "panic.example."), q(4, "after.example.")))
	f.Add(frame(response, q(5, "example.org.")))
	f.Add(frame([]byte{1, 2, 3}, q(6, "example.org.")))              // shorter than a header
	f.Add(append(frame(q(7, "example.org.")), 0, 0, 0, 12, 1, 2, 3)) // zero length, then more
	f.Add(append(frame(q(8, "example.org.")), 0, 200, 1, 2, 3))      // a length that lies
	f.Add([]byte{0})                                                 // half a prefix
	f.Add([]byte{})

	var mu sync.Mutex
	var violations []string // the handler's findings, collected per input
	s := &Server{
		Handler: HandlerFunc(func(_ context.Context, req *Request) []byte {
			if len(req.Raw) < HeaderLen || req.Proto != "tcp" {
				mu.Lock()
				violations = append(violations, fmt.Sprintf("handler given %d bytes over %q", len(req.Raw), req.Proto))
				mu.Unlock()
			}
			if binary.BigEndian.Uint16(req.Raw) == fuzzPanicID {
				panic("fuzzed query asked for it")
			}
			return rawReply(req.Raw, dns.RcodeSuccess)
		}),
		TCPIdleTimeout: ioTimeout, // the input is all there at once; only a server bug waits
	}
	_, tcpAddr := startServer(f, s)

	f.Fuzz(func(t *testing.T, stream []byte) {
		stream, want := fuzzFrames(stream)
		c, err := net.DialTimeout("tcp", tcpAddr, ioTimeout)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(2 * ioTimeout))
		// Written while the answers are read, so that neither side's
		// buffers can fill up and stall the other.
		written := make(chan error, 1)
		go func() {
			_, err := c.Write(stream)
			if err == nil {
				err = c.(*net.TCPConn).CloseWrite()
			}
			written <- err
		}()

		var prefix [2]byte
		for {
			if _, err := io.ReadFull(c, prefix[:]); err != nil {
				if !errors.Is(err, io.EOF) {
					t.Fatalf("reading answers: %v", err)
				}
				break
			}
			b := make([]byte, binary.BigEndian.Uint16(prefix[:]))
			if _, err := io.ReadFull(c, b); err != nil {
				t.Fatalf("reading an answer: %v", err)
			}
			m := new(dns.Msg)
			if err := m.Unpack(b); err != nil {
				t.Fatalf("an answer does not parse: %v\n%x", err, b)
			}
			if !m.Response || want[m.Id] == 0 {
				t.Fatalf("answer ID %#x (QR %v) matches no unanswered query; want %v", m.Id, m.Response, want)
			}
			want[m.Id]--
		}
		if err := <-written; err != nil {
			t.Fatalf("writing the stream: %v", err)
		}
		for id, n := range want {
			if n > 0 {
				t.Fatalf("query %#x unanswered (%d times) when the server closed the connection", id, n)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if len(violations) > 0 {
			v := violations
			violations = nil
			t.Fatal(strings.Join(v, "\n"))
		}
	})
}

// fuzzPanicID is the query ID FuzzServerTCP's handler panics on; the server
// answers it SERVFAIL all the same.
const fuzzPanicID = 0xDEAD

// fuzzFrames reads stream as a client's TCP byte stream the way RFC 7766
// frames it. It returns the part of stream the server reads — everything up
// to and including the first zero-length prefix, which ends the
// conversation — and how many answers each query ID is owed: one for every
// complete frame at least a header long with QR clear.
func fuzzFrames(stream []byte) (sent []byte, want map[uint16]int) {
	want = make(map[uint16]int)
	off := 0
	for off+2 <= len(stream) {
		n := int(binary.BigEndian.Uint16(stream[off:]))
		off += 2
		if n == 0 {
			return stream[:off], want
		}
		if off+n > len(stream) {
			break // a length the rest of the stream does not hold
		}
		if msg := stream[off : off+n]; n >= HeaderLen && Flags(msg)&FlagQR == 0 {
			want[binary.BigEndian.Uint16(msg)]++
		}
		off += n
	}
	return stream, want
}
