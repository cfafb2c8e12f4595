package server

import (
	"context"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkServerUDP measures one query's round trip through the server
// over loopback, client included, with a handler that only flips the
// query into a response. allocs/op counts the whole process, client side
// included.
func BenchmarkServerUDP(b *testing.B) {
	s := &Server{Handler: HandlerFunc(func(_ context.Context, req *Request) []byte {
		answer := append([]byte(nil), req.Raw...)
		answer[2] |= 0x80
		return answer
	})}
	udpAddr, _ := startServer(b, s)
	query := pack(b, newQuery(1, "example.org."))

	roundTrips := func(b *testing.B, next func() bool) {
		c, err := net.Dial("udp", udpAddr)
		if err != nil {
			b.Error(err)
			return
		}
		defer c.Close()
		buf := make([]byte, 512)
		for next() {
			c.SetReadDeadline(time.Now().Add(ioTimeout))
			if _, err := c.Write(query); err != nil {
				b.Error(err)
				return
			}
			if _, err := c.Read(buf); err != nil {
				b.Error(err)
				return
			}
		}
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		roundTrips(b, b.Loop)
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) { roundTrips(b, pb.Next) })
	})
}

// BenchmarkAdmit is what admission costs a query that needs a worker:
// taking a server permit and one of its client's, and giving both back,
// from one goroutine and from every core at once (clients of several
// addresses).
func BenchmarkAdmit(b *testing.B) {
	s := &Server{Handler: HandlerFunc(echo)}
	_, _ = startServer(b, s)
	client := netip.MustParseAddr("192.0.2.7")
	b.Run("serial", func(b *testing.B) {
		for b.Loop() {
			c, ok := s.admit(client)
			if !ok {
				b.Fatal("refused")
			}
			s.release(c)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		var next atomic.Uint32
		b.RunParallel(func(pb *testing.PB) {
			client := netip.AddrFrom4([4]byte{192, 0, 2, byte(next.Add(1))})
			for pb.Next() {
				c, ok := s.admit(client)
				if !ok {
					b.Fatal("refused")
				}
				s.release(c)
			}
		})
	})
}

// flipFast answers every query on the reader (a cache hit's path): the
// query flipped into a response, built in the reader's answer memory.
type flipFast struct{}

func (flipFast) ServeDNS(_ context.Context, req *Request) []byte { return nil }
func (flipFast) Abandon(*Request)                                {}
func (flipFast) ServeFast(req *Request) ([]byte, bool) {
	answer := append(req.Answer[:0], req.Raw...)
	answer[2] |= 0x80
	return answer, true
}

// BenchmarkServerUDPFast is BenchmarkServerUDP with every answer made on
// the reader, as cache hits are, and sent by it (with sendmmsg on Linux).
func BenchmarkServerUDPFast(b *testing.B) {
	udpAddr, _ := startServer(b, &Server{Handler: flipFast{}})
	query := pack(b, newQuery(1, "example.org."))
	roundTrips := func(b *testing.B, next func() bool) {
		c, err := net.Dial("udp", udpAddr)
		if err != nil {
			b.Error(err)
			return
		}
		defer c.Close()
		buf := make([]byte, 512)
		for next() {
			c.SetReadDeadline(time.Now().Add(ioTimeout))
			if _, err := c.Write(query); err != nil {
				b.Error(err)
				return
			}
			if _, err := c.Read(buf); err != nil {
				b.Error(err)
				return
			}
		}
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		roundTrips(b, b.Loop)
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) { roundTrips(b, pb.Next) })
	})
}
