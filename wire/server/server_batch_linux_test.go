package server

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"

	"github.com/nxdnsd/nxdnsd/wire/dnsmsg"
)

// A batch takes every datagram queued on the socket with one recvmmsg,
// each with its own sender and bytes, and sends the answers queued for
// them with one sendmmsg, each to its own sender.
func TestUDPBatchReadsAndAnswersTogether(t *testing.T) {
	t.Parallel()
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	rc, err := pc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	const clients, each = 3, 4
	conns := make([]*net.UDPConn, clients)
	sent := map[uint16]netip.AddrPort{} // query ID → its sender
	for c := range conns {
		conns[c], err = net.DialUDP("udp", nil, pc.LocalAddr().(*net.UDPAddr))
		if err != nil {
			t.Fatal(err)
		}
		defer conns[c].Close()
		for k := range each {
			id := uint16(100*c + k)
			if _, err := conns[c].Write(pack(t, newQuery(id, fmt.Sprintf("q%d.example.", id)))); err != nil {
				t.Fatal(err)
			}
			sent[id] = conns[c].LocalAddr().(*net.UDPAddr).AddrPort()
		}
	}

	b := newUDPBatch(rc, 16, false)
	got, largest := 0, 0
	pc.SetReadDeadline(time.Now().Add(ioTimeout))
	for got < clients*each {
		n, err := b.read()
		if err != nil {
			t.Fatalf("after %d datagrams: %v", got, err)
		}
		largest = max(largest, n)
		for i := range n {
			raw, from, _, _ := b.datagram(i)
			id := binary.BigEndian.Uint16(raw)
			var q dns.Msg
			if err := q.Unpack(raw); err != nil || q.Question[0].Name != fmt.Sprintf("q%d.example.", id) {
				t.Fatalf("datagram %d: %v %v", i, err, q.Question)
			}
			if from != sent[id] {
				t.Fatalf("query %d from %v, sent from %v", id, from, sent[id])
			}
			answer := append(b.answerBuf(i), raw...)
			answer[2] |= 0x80 // QR
			b.queue(i, answer, netip.Addr{}, 0)
		}
		got += n
		if b.flush(zap.NewNop()); b.sent != b.nout {
			t.Fatalf("sent %d of %d answers", b.sent, b.nout)
		}
	}
	if largest < 2 {
		t.Errorf("the largest batch held %d datagram: all %d were queued before the first read", largest, got)
	}
	buf := make([]byte, 512)
	for c, conn := range conns {
		conn.SetReadDeadline(time.Now().Add(ioTimeout))
		for k := range each {
			n, err := conn.Read(buf)
			if err != nil {
				t.Fatalf("client %d, answer %d: %v", c, k, err)
			}
			if id := binary.BigEndian.Uint16(buf); n < dnsmsg.HeaderLen || sent[id] != conn.LocalAddr().(*net.UDPAddr).AddrPort() || dnsmsg.Flags(buf)&dnsmsg.FlagQR == 0 {
				t.Fatalf("client %d got answer %d (%d bytes), not one of its own", c, id, n)
			}
		}
	}
}

// Queries sent in bursts, faster than they are answered, are each answered
// once, whether the reader takes them one at a time or in batches, on the
// fast path and through workers, over IPv4 and IPv6; the handler sees each
// client's own address.
func TestServerUDPBursts(t *testing.T) {
	t.Parallel()
	for _, batch := range []int{1, DefaultUDPBatch} {
		for _, ip := range []string{"127.0.0.1", "::1"} {
			t.Run(fmt.Sprintf("batch %d %s", batch, ip), func(t *testing.T) {
				t.Parallel()
				if ip == "::1" {
					if pc, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback}); err != nil {
						t.Skipf("prerequisite missing: IPv6 loopback: %v", err)
					} else {
						pc.Close()
					}
				}
				h := &fastEcho{}
				udp, _ := startServer(t, &Server{Handler: h, UDPBatch: batch, Listen: []string{net.JoinHostPort(ip, "0")}})
				burst(t, udp, 3, 60)
				if f, w := h.fast.Load(), h.slow.Load(); f != 90 || w != 90 {
					t.Errorf("fast path %d, workers %d; want 90 and 90", f, w)
				}
			})
		}
	}
}

// burst has each of clients sockets send n queries at once, half of them
// for the fast path, then read every answer, and checks that each query
// was answered once with its sender's address.
func burst(t *testing.T, addr string, clients, n int) {
	t.Helper()
	for c := range clients {
		conn, err := net.Dial("udp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		for k := range n {
			name := fmt.Sprintf("w%d.example.", k)
			if k%2 == 0 {
				name = fmt.Sprintf("f%d.fast.", k)
			}
			if _, err := conn.Write(pack(t, newQuery(uint16(k), name))); err != nil {
				t.Fatal(err)
			}
		}
		seen := make([]bool, n)
		buf := make([]byte, 512)
		conn.SetReadDeadline(time.Now().Add(ioTimeout))
		for range n {
			m, err := conn.Read(buf)
			if err != nil {
				t.Fatalf("client %d after %d answers: %v", c, countTrue(seen), err)
			}
			var r dns.Msg
			if err := r.Unpack(buf[:m]); err != nil || int(r.Id) >= n || seen[r.Id] || len(r.Answer) != 1 {
				t.Fatalf("client %d: answer %v (%v), or seen before", c, r.Id, err)
			}
			seen[r.Id] = true
			if txt := r.Answer[0].(*dns.TXT).Txt; txt[1] != conn.LocalAddr().String() {
				t.Fatalf("client %d: the handler saw %v, the client is %v", c, txt[1], conn.LocalAddr())
			}
		}
	}
}

func countTrue(bs []bool) (n int) {
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// fakeRawConn runs the read and write functions it is given at once, on
// descriptor -1, as a ready socket would, until they report done; its
// Write fails once writes is zero, so that a flush that does not end is
// seen, not waited for.
type fakeRawConn struct {
	writes int // Write calls left
}

func (*fakeRawConn) Control(f func(uintptr)) error { f(^uintptr(0)); return nil }

func (*fakeRawConn) Read(f func(uintptr) bool) error {
	for !f(^uintptr(0)) {
	}
	return nil
}

func (c *fakeRawConn) Write(f func(uintptr) bool) error {
	if c.writes == 0 {
		return errors.New("fakeRawConn: no writes left")
	}
	c.writes--
	for !f(^uintptr(0)) {
	}
	return nil
}

// A sendmmsg that returns 0 without an error (sent nothing, said nothing)
// cannot make flush loop: each such call gives up on one answer.
func TestUDPBatchFlushEndsWhenNothingIsSent(t *testing.T) {
	t.Parallel()
	rc := &fakeRawConn{writes: 100}
	b := newUDPBatch(rc, 4, false)
	b.reset()
	for i := range 3 {
		b.queue(i, []byte("answer"), netip.Addr{}, 0)
	}
	calls := 0
	b.send = func(uintptr) bool {
		calls++
		b.n, b.err = 0, nil
		return true
	}
	b.flush(zap.NewNop())
	if calls != 3 || b.sent != b.nout {
		t.Errorf("%d sendmmsg calls for 3 answers, %d of %d given up; want 3 and every one", calls, b.sent, b.nout)
	}
}

// A recvmmsg that returns 0 without an error is a read error, which the
// reader loop backs off from, not a read of nothing to go round again on.
func TestUDPBatchReadOfNothingIsAnError(t *testing.T) {
	t.Parallel()
	b := newUDPBatch(&fakeRawConn{}, 4, false)
	b.recv = func(uintptr) bool {
		b.n, b.err = 0, nil
		return true
	}
	if n, err := b.read(); err == nil {
		t.Errorf("a recvmmsg of nothing read %d datagrams and no error, want an error", n)
	}
}
