package transport

import (
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// The fuzz targets of the wire package. Their seed corpora are the f.Add
// calls below and the files in testdata/fuzz/<FuzzName>/ (Go's corpus
// format; `go test -fuzz` also writes its findings there). .ci/run runs
// each for a few seconds; a longer run is
//
//	go test -run '^$' -fuzz '^FuzzDecodeReply$' -fuzztime 10m -parallel 1 ./wire/transport/

// FuzzDecodeReply feeds whatever an upstream might send to decodeReply,
// the check every transport applies to an answer: it must never panic, and
// either reject the bytes with one of the peer-fault sentinels (the pool
// then fails over) or return a response to the very question asked, with
// the query's ID restored and the query left untouched.
func FuzzDecodeReply(f *testing.F) {
	for _, b := range wiretest.ReplySeeds(f) {
		f.Add(b)
	}
	q := wiretest.ReplyQuery()
	sent := pack(f, q)
	peerFaults := []error{ErrMalformed, ErrIDMismatch, ErrRefused, ErrQuestionMismatch}

	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := decodeReply(q, wiretest.ReplyWireID, raw)
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
		if got := binary.BigEndian.Uint16(raw); got != wiretest.ReplyWireID {
			t.Fatalf("accepted an answer with wire ID %#x, sent %#x", got, wiretest.ReplyWireID)
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
