package server

import (
	"errors"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
)

// failingIn is a socket whose every read fails with err; it counts the
// reads, and after limit of them reports itself closed, which ends the
// loop: a loop that spins is seen, not waited for.
type failingIn struct {
	err   error
	reads atomic.Int32
	limit int32
}

func (f *failingIn) read() (int, error) {
	if f.reads.Add(1) > f.limit {
		return 0, net.ErrClosed
	}
	return 0, f.err
}

func (*failingIn) datagram(int) ([]byte, netip.AddrPort, netip.Addr, int32) {
	panic("failingIn has no datagram")
}
func (*failingIn) answerBuf(int) []byte                 { return nil }
func (*failingIn) queue(int, []byte, netip.Addr, int32) {}
func (*failingIn) flush(*zap.Logger)                    {}

// A reader whose socket fails every read does not spin: the first failure
// is retried at once, the next ones back off as the accept loop does
// (5 ms, doubling, at most 1 s), and Shutdown ends the wait.
func TestUDPReaderBacksOffPersistentReadErrors(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := &Server{log: zap.NewNop(), done: make(chan struct{})}
		in := &failingIn{err: errors.New("the socket is broken"), limit: 1000}
		ended := make(chan struct{})
		go func() {
			defer close(ended)
			s.readFrom(in, nil)
		}()
		synctest.Wait()
		if n := in.reads.Load(); n != 2 {
			t.Fatalf("%d reads at once, want 2: the failure retried once, then a wait", n)
		}
		// Reads at 0, 0, 5, 15, 35, 75, 155, 315 and 635 ms: nine in the
		// first second.
		time.Sleep(time.Second)
		synctest.Wait()
		if n := in.reads.Load(); n != 9 {
			t.Errorf("%d reads in the first second, want 9", n)
		}
		close(s.done) // Shutdown begins: the wait ends
		<-ended
	})
}

// memIn is a socket in memory: every read takes the same batch of
// datagrams, until total have been read; then it is closed.
type memIn struct {
	raw     []byte
	from    netip.AddrPort
	batch   int
	total   int
	ans     []byte
	answers int
}

func (m *memIn) read() (int, error) {
	if m.total <= 0 {
		return 0, net.ErrClosed
	}
	n := min(m.batch, m.total)
	m.total -= n
	return n, nil
}

func (m *memIn) datagram(int) ([]byte, netip.AddrPort, netip.Addr, int32) {
	return m.raw, m.from, netip.Addr{}, 0
}
func (m *memIn) answerBuf(int) []byte                 { return m.ans[:0] }
func (m *memIn) queue(int, []byte, netip.Addr, int32) { m.answers++ }
func (m *memIn) flush(*zap.Logger)                    {}

// BenchmarkUDPReaderLoop is the reader loop's own cost per datagram on the
// hit path (every query answered by ServeFast), sockets left out: through
// the udpIn interface, as readFrom runs, and through a copy of its loop
// calling a concrete type, which is what the interface costs.
func BenchmarkUDPReaderLoop(b *testing.B) {
	s := &Server{log: zap.NewNop(), done: make(chan struct{}), Handler: flipFast{}}
	raw := pack(b, newQuery(1, "example.org."))
	from := netip.MustParseAddrPort("192.0.2.1:5353")
	newIn := func(total int) *memIn {
		return &memIn{raw: raw, from: from, batch: DefaultUDPBatch, total: total, ans: make([]byte, 0, clientAnswerBufLen)}
	}
	b.Run("interface", func(b *testing.B) {
		b.ReportAllocs()
		in := newIn(b.N)
		r := &udpReader{s: s, fast: flipFast{}, req: new(Request), rc: nil}
		b.ResetTimer()
		s.readFrom(in, r)
		if in.answers != b.N {
			b.Fatalf("%d answers for %d datagrams", in.answers, b.N)
		}
	})
	b.Run("concrete", func(b *testing.B) {
		b.ReportAllocs()
		in := newIn(b.N)
		r := &udpReader{s: s, fast: flipFast{}, req: new(Request), rc: nil}
		b.ResetTimer()
		for {
			n, err := in.read()
			if err != nil {
				break
			}
			for i := range n {
				raw, from, local, ifindex := in.datagram(i)
				if !from.IsValid() {
					continue
				}
				if answer := r.take(raw, from, local, ifindex, in.answerBuf(i)); answer != nil {
					in.queue(i, answer, local, ifindex)
				}
			}
			in.flush(s.log)
		}
		if in.answers != b.N {
			b.Fatalf("%d answers for %d datagrams", in.answers, b.N)
		}
	})
}
