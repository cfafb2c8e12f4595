package server

import (
	"errors"
	"net"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

// A worker's answer on a socket closed meanwhile fails with net.ErrClosed
// and is sent nowhere: not on the socket that has taken the closed one's
// descriptor number since.
//
// Not parallel: the socket opened after the close must get the closed
// one's number (the lowest free), with no other test opening descriptors.
func TestUDPSenderNeverWritesAClosedSocketsNumber(t *testing.T) {
	client := listenLoopback(t)
	old := listenLoopback(t)
	rc := rawConn(old)
	oldFD := fdOf(t, old)
	old.Close()
	taken := listenLoopback(t)
	if fdOf(t, taken) != oldFD {
		t.Skipf("prerequisite missing: the closed socket's descriptor %d was not reused (got %d)", oldFD, fdOf(t, taken))
	}

	w := newUDPSender()
	to := client.LocalAddr().(*net.UDPAddr).AddrPort()
	if _, err := w.send(rc, false, []byte("answer"), to, netip.Addr{}, 0); !errors.Is(err, net.ErrClosed) {
		t.Errorf("send on a closed socket: %v, want net.ErrClosed", err)
	}
	// Sent on loopback, a datagram would be queued on client before
	// sendmsg returned.
	var n int
	var rerr error
	crc, _ := client.SyscallConn()
	_ = crc.Control(func(fd uintptr) {
		buf := make([]byte, 64)
		n, _, rerr = unix.Recvfrom(int(fd), buf, unix.MSG_DONTWAIT)
	})
	if rerr != unix.EAGAIN {
		t.Errorf("the client got %d bytes (%v) from the socket that took the descriptor, want nothing", n, rerr)
	}
}

func listenLoopback(tb testing.TB) *net.UDPConn {
	tb.Helper()
	pc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { pc.Close() })
	return pc
}

func fdOf(tb testing.TB, pc *net.UDPConn) int {
	tb.Helper()
	rc, err := pc.SyscallConn()
	if err != nil {
		tb.Fatal(err)
	}
	fd := -1
	if err := rc.Control(func(d uintptr) { fd = int(d) }); err != nil {
		tb.Fatal(err)
	}
	return fd
}

// BenchmarkUDPSenderSend is a worker's write of one answer to a client
// over loopback, from one worker and from several on one socket at once.
func BenchmarkUDPSenderSend(b *testing.B) {
	client := listenLoopback(b) // never read: the kernel drops what overflows
	pc := listenLoopback(b)
	target := rawConn(pc)
	to := client.LocalAddr().(*net.UDPAddr).AddrPort()
	answer := make([]byte, 64)
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		w := newUDPSender()
		for b.Loop() {
			if _, err := w.send(target, false, answer, to, netip.Addr{}, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			w := newUDPSender()
			for pb.Next() {
				if _, err := w.send(target, false, answer, to, netip.Addr{}, 0); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
