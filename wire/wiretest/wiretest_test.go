package wiretest

import (
	"context"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The server answers on UDP and TCP at one address and counts both.
func TestServerServesBothProtocols(t *testing.T) {
	t.Parallel()
	srv := NewServer(t, Answer())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	for _, proto := range []string{"udp", "tcp"} {
		c := &dns.Client{Net: proto}
		q := Query("example.com", dns.TypeA)
		r, _, err := c.ExchangeContext(ctx, q, srv.Addr)
		if err != nil {
			t.Fatalf("%s: %v", proto, err)
		}
		if r.Id != q.Id || len(r.Answer) != 1 {
			t.Errorf("%s: answer %v does not answer %v", proto, r, q)
		}
	}
	if srv.UDPQueries() != 1 || srv.TCPQueries() != 1 || srv.TCPAccepts() != 1 {
		t.Errorf("counters udp=%d tcp=%d accepts=%d, want 1 each",
			srv.UDPQueries(), srv.TCPQueries(), srv.TCPAccepts())
	}
}

// Close stops a stalled handler: a blackhole never outlives its test.
func TestCloseUnblocksStalledHandlers(t *testing.T) {
	t.Parallel()
	received := make(chan string, 2)
	srv := NewServer(t, Notify(received, Stall))

	for _, proto := range []string{"udp", "tcp"} {
		c, err := dns.Dial(proto, srv.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.WriteMsg(Query("stall.example", dns.TypeA)); err != nil {
			t.Fatal(err)
		}
		<-received
	}
	srv.Close() // returns only once every handler has
	srv.Close() // and is idempotent
}

func TestRefusingRefuses(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c := &dns.Client{Net: "tcp"}
	if _, _, err := c.ExchangeContext(ctx, Query("example.com", dns.TypeA), Refusing(t)); err == nil {
		t.Fatal("an exchange with the refusing port succeeded")
	}
}
