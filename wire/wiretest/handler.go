package wiretest

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/miekg/dns"
)

// Writer is how a Handler answers one query: by message, by raw bytes, or
// by closing the connection.
type Writer struct {
	srv   *Server
	proto string

	pc   net.PacketConn // UDP
	addr net.Addr       // UDP: the client

	conn       net.Conn // TCP
	connClosed bool     // CloseConn was called
}

// Proto returns "udp" or "tcp": the protocol the query came over.
func (w *Writer) Proto() string { return w.proto }

// Done is closed when the server stops. A handler that waits must also
// wait on Done, so that the test's cleanup can stop it.
func (w *Writer) Done() <-chan struct{} { return w.srv.done }

// WriteMsg packs m and sends it, framed over TCP; nothing is truncated to
// fit. A packing failure is reported at cleanup. Send errors are ignored:
// the client may have gone, which is what many tests arrange.
func (w *Writer) WriteMsg(m *dns.Msg) {
	b, err := m.Pack()
	if err != nil {
		w.srv.report(fmt.Errorf("packing an answer: %w", err))
		return
	}
	w.WriteRaw(b)
}

// WriteRaw sends b as one message: one datagram over UDP, one length-framed
// message over TCP.
func (w *Writer) WriteRaw(b []byte) {
	if w.proto == "udp" {
		_, _ = w.pc.WriteTo(b, w.addr)
		return
	}
	frame := make([]byte, 2+len(b))
	binary.BigEndian.PutUint16(frame, uint16(len(b)))
	copy(frame[2:], b)
	_, _ = w.conn.Write(frame)
}

// CloseConn closes the TCP connection the query came on, after whatever was
// written. Over UDP it does nothing: the query simply goes unanswered.
func (w *Writer) CloseConn() {
	if w.proto == "tcp" {
		w.connClosed = true
		_ = w.conn.Close()
	}
}

// Query returns a recursive query for name (made fully qualified) and qtype,
// with a random ID.
func Query(name string, qtype uint16) *dns.Msg {
	return new(dns.Msg).SetQuestion(dns.Fqdn(name), qtype)
}

// TestAddr is the address of the A records the handlers answer with, from
// TEST-NET-1 (RFC 5737).
var TestAddr = netip.MustParseAddr("192.0.2.1")

// A returns an A record for name with TestAddr's address plus i in its last
// byte, so that answers can be told apart.
func A(name string, i int) *dns.A {
	ip := TestAddr.As4()
	ip[3] += byte(i)
	return &dns.A{
		Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
		A:   net.IP(ip[:]),
	}
}

// Answer returns a handler answering NOERROR with rrs, or when rrs is empty
// with one A record (A(qname, 0)).
func Answer(rrs ...dns.RR) Handler {
	return func(w *Writer, q *dns.Msg) {
		r := new(dns.Msg).SetReply(q)
		r.Answer = rrs
		if len(rrs) == 0 {
			r.Answer = []dns.RR{A(q.Question[0].Name, 0)}
		}
		w.WriteMsg(r)
	}
}

// Rcode returns a handler answering with rcode and no records.
func Rcode(rcode int) Handler {
	return func(w *Writer, q *dns.Msg) {
		w.WriteMsg(new(dns.Msg).SetRcode(q, rcode))
	}
}

// Truncating returns a handler that over UDP answers with TC set and no
// records, and over TCP answers whole with n A records (A(qname, 0..n-1)).
func Truncating(n int) Handler {
	return func(w *Writer, q *dns.Msg) {
		r := new(dns.Msg).SetReply(q)
		if w.Proto() == "udp" {
			r.Truncated = true
			w.WriteMsg(r)
			return
		}
		for i := range n {
			r.Answer = append(r.Answer, A(q.Question[0].Name, i))
		}
		w.WriteMsg(r)
	}
}

// Stall reads the query and never answers: a blackhole. It returns when the
// server stops.
func Stall(w *Writer, _ *dns.Msg) {
	<-w.Done()
}

// WrongID answers with an ID other than the query's.
func WrongID(w *Writer, q *dns.Msg) {
	r := new(dns.Msg).SetReply(q)
	r.Id = q.Id + 1
	r.Answer = []dns.RR{A(q.Question[0].Name, 0)}
	w.WriteMsg(r)
}

// WrongQuestion answers with the query's ID and another question.
func WrongQuestion(w *Writer, q *dns.Msg) {
	r := new(dns.Msg).SetReply(q)
	r.Question[0].Name = "wrong." + r.Question[0].Name
	w.WriteMsg(r)
}

// Garbage answers with the query's ID followed by bytes that do not parse:
// a header promising an answer record that is not there.
func Garbage(w *Writer, q *dns.Msg) {
	b := make([]byte, 16)
	binary.BigEndian.PutUint16(b, q.Id)
	b[2] = 0x80                          // QR
	binary.BigEndian.PutUint16(b[6:], 1) // ANCOUNT 1
	copy(b[12:], []byte{0xff, 0xff, 0xff, 0xff})
	w.WriteRaw(b)
}

// CloseConn closes the TCP connection without answering; a UDP query goes
// unanswered.
func CloseConn(w *Writer, _ *dns.Msg) {
	w.CloseConn()
}

// Delay returns a handler that waits d, then runs h; it returns early, h not
// run, when the server stops.
func Delay(d time.Duration, h Handler) Handler {
	return func(w *Writer, q *dns.Msg) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			h(w, q)
		case <-w.Done():
		}
	}
}

// Gate returns a handler that waits until release is closed, then runs h;
// it returns early, h not run, when the server stops.
func Gate(release <-chan struct{}, h Handler) Handler {
	return func(w *Writer, q *dns.Msg) {
		select {
		case <-release:
			h(w, q)
		case <-w.Done():
		}
	}
}

// Notify returns a handler that sends the query's protocol on received
// (waiting for room, or for the server to stop), then runs h. Tests use it
// to act once the server has the query, instead of sleeping.
func Notify(received chan<- string, h Handler) Handler {
	return func(w *Writer, q *dns.Msg) {
		select {
		case received <- w.Proto():
			h(w, q)
		case <-w.Done():
		}
	}
}

// ByProto returns a handler running udp for UDP queries and tcp for TCP ones.
func ByProto(udp, tcp Handler) Handler {
	return func(w *Writer, q *dns.Msg) {
		if w.Proto() == "udp" {
			udp(w, q)
		} else {
			tcp(w, q)
		}
	}
}

// Then returns a handler running h and then after it: say, answer and then
// close the connection.
func Then(h, after Handler) Handler {
	return func(w *Writer, q *dns.Msg) {
		h(w, q)
		after(w, q)
	}
}
