package server

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/dnsmsg"
)

// The fuzz targets of the wire package. Their seed corpora are the f.Add
// calls below and the files in testdata/fuzz/<FuzzName>/ (Go's corpus
// format; `go test -fuzz` also writes its findings there). .ci/run runs
// each for a few seconds; a longer run is
//
//	go test -run '^$' -fuzz '^FuzzServerTCP$' -fuzztime 10m -parallel 1 ./wire/server/

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
			if len(req.Raw) < dnsmsg.HeaderLen || req.Proto != "tcp" {
				mu.Lock()
				violations = append(violations, fmt.Sprintf("handler given %d bytes over %q", len(req.Raw), req.Proto))
				mu.Unlock()
			}
			if binary.BigEndian.Uint16(req.Raw) == fuzzPanicID {
				panic("fuzzed query asked for it")
			}
			return dnsmsg.Reply(req.Raw, dns.RcodeSuccess)
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
		if msg := stream[off : off+n]; n >= dnsmsg.HeaderLen && dnsmsg.Flags(msg)&dnsmsg.FlagQR == 0 {
			want[binary.BigEndian.Uint16(msg)]++
		}
		off += n
	}
	return stream, want
}
