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
