package wire

import (
	"context"
	"net"
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
